// Pools and nodes: each pool's capacity, then each node with a picture of its GPUs — whole GPUs
// as boxes, MIG instances as slices inside their GPU — coloured by who holds them. Holders come
// from the running tasks' allocations (GET /v1/jobs?state=JOB_STATE_RUNNING), matched by device id.
import { get, post, patch, ApiError } from './api.js';
import { actionFailed, clearErrors, fieldRow as row, formFailed } from './form.js';
import { h, replace, state, tflops, vram, colour, pct, ago } from './dom.js';

function holdersByDevice(jobs) {
  const map = new Map();
  for (const job of jobs) {
    for (const t of job.tasks || []) {
      if (!['TASK_STATE_RUNNING', 'TASK_STATE_SCHEDULED'].includes(t.state)) continue;
      for (const a of t.allocations || []) {
        if (!map.has(a.deviceId)) map.set(a.deviceId, []);
        map.get(a.deviceId).push({ task: t.id, job: job.id, tenant: job.spec?.tenant || '',
          milliTflops: Number(a.milliTflops || 0), vramMib: Number(a.vramMib || 0) });
      }
    }
  }
  return map;
}

function bar(holders, whole, key, label) {
  const b = h('div', { class: 'bar', title: label });
  for (const x of holders) {
    b.append(h('span', { style: { width: pct(x[key], whole) + '%', background: colour(x.tenant) } }));
  }
  return b;
}

function holderLine(x) {
  return h('a', { class: 'holder', href: `#/jobs/${encodeURIComponent(x.job)}`,
    style: { '--c': colour(x.tenant) }, title: `${x.task} (${x.tenant})` }, x.tenant || x.task);
}

// The agent's last sample of a device (utilization, memory, power, temperature, ECC/XID); a MIG
// parent the node does not list borrows its first instance's.
function sampleLine(s) {
  if (!s) return h('div', { class: 'sample muted' }, 'no sample yet');
  const errs = Number(s.eccErrors || 0) + Number(s.xidErrors || 0);
  return h('div', { class: 'sample' + (errs > 0 ? ' errors' : ''),
    title: `utilization ${s.utilizationPct || 0}% · memory ${vram(s.memoryUsedMib)} / ${vram(s.memoryTotalMib)} · ` +
      `${s.powerWatts || 0} W · ${s.temperatureC || 0} °C · ECC ${s.eccErrors || 0} · XID ${s.xidErrors || 0}` },
  h('span', { class: 'util', style: { '--u': `${Math.min(100, Number(s.utilizationPct || 0))}%` } },
    `${s.utilizationPct || 0}%`),
  ` ${s.powerWatts || 0}W ${s.temperatureC || 0}°C`, errs > 0 ? ` · ${errs} err` : '');
}

function gpuBox(dev, slices, holders) {
  const phys = dev.capacity?.physical || {};
  const alloc = dev.capacity?.allocated || {};
  const mine = holders.get(dev.id) || [];
  const box = h('div', { class: 'gpu' + (dev.healthy === false ? ' unhealthy' : ''),
    'data-device': dev.id, title: dev.id },
  h('div', { class: 'model' }, dev.model || 'GPU', dev.healthy === false ? ' (unhealthy)' : ''),
  h('div', { class: 'muted mono' }, dev.id.slice(-12)),
  bar(mine, phys.milliTflops, 'milliTflops', 'compute'),
  bar(mine, phys.vramMib, 'vramMib', 'memory'),
  h('div', { class: 'muted' }, `${tflops(alloc.milliTflops)} / ${tflops(phys.milliTflops)}`),
  h('div', { class: 'muted' }, `${vram(alloc.vramMib)} / ${vram(phys.vramMib)}`),
  sampleLine(dev.sample),
  mine.map(holderLine));
  if (slices.length) {
    const row = h('div', { class: 'slices' });
    for (const s of slices) {
      const held = holders.get(s.id) || [];
      const who = held[0];
      row.append(h('span', { class: 'slice' + (who ? ' held' : ''), 'data-device': s.id,
        style: who ? { '--c': colour(who.tenant) } : undefined,
        title: `${s.migProfile || 'MIG'} ${s.id}${who ? ' — ' + who.task + ' (' + who.tenant + ')' : ' — free'}`
      }, s.migProfile || 'MIG'));
    }
    box.append(row);
    for (const s of slices) (holders.get(s.id) || []).forEach((x) => box.append(holderLine(x)));
  }
  return box;
}

// An admin's actions on a node (POST /v1/nodes/{name}:cordon|uncordon|drain) and on a device a
// fatal fault took out of service (…/devices/{id}:clear-fault). Each is the API's own call with the
// signed-in credential (audited; refused with 403 for others, the message shown on the card).
function nodeActions(node, act) {
  const out = h('span', { class: 'field-error node-action-error' });
  const button = (label, verb, cls, ask) => h('button', { type: 'button', class: 'node-action ' + cls,
    onclick: () => {
      if (ask && !window.confirm(ask)) return;
      act(`/v1/nodes/${encodeURIComponent(node.name)}:${verb}`, out);
    } }, label);
  const s = node.state;
  const faulted = (node.devices || []).filter((d) => d.fault);
  return h('div', { class: 'actions' },
    s === 'NODE_STATE_READY' ? button('Cordon', 'cordon', 'cordon') : null,
    ['NODE_STATE_CORDONED', 'NODE_STATE_DRAINING'].includes(s) ? button('Uncordon', 'uncordon', 'uncordon') : null,
    ['NODE_STATE_READY', 'NODE_STATE_CORDONED'].includes(s) ? button('Drain', 'drain', 'danger drain',
      `Drain ${node.name}? Its running tasks are stopped and requeued.`) : null,
    faulted.map((d) => h('button', { type: 'button', class: 'node-action clear-fault', title: d.fault,
      onclick: () => act(`/v1/nodes/${encodeURIComponent(node.name)}/devices/${encodeURIComponent(d.id)}:clear-fault`, out)
    }, `Clear fault on ${d.id.slice(-12)}`)),
    out);
}

function nodeCard(node, holders, act) {
  const gpus = [];
  const slicesOf = new Map();
  for (const d of node.devices || []) {
    if (d.parentId) {
      if (!slicesOf.has(d.parentId)) slicesOf.set(d.parentId, []);
      slicesOf.get(d.parentId).push(d);
    } else {
      gpus.push(d);
    }
  }
  // A MIG parent the node does not list on its own: a box summing its instances.
  for (const [parent, slices] of slicesOf) {
    if (gpus.some((g) => g.id === parent)) continue;
    const sum = (kind, key) => slices.reduce((n, s) => n + Number(s.capacity?.[kind]?.[key] || 0), 0);
    gpus.push({ id: parent, model: `${slices[0].model || 'GPU'} (MIG)`,
      healthy: slices.every((s) => s.healthy !== false), sample: slices[0].sample,
      capacity: { physical: { milliTflops: sum('physical', 'milliTflops'), vramMib: sum('physical', 'vramMib') },
        allocated: { milliTflops: sum('allocated', 'milliTflops'), vramMib: sum('allocated', 'vramMib') } } });
  }
  return h('section', { class: 'node', 'data-node': node.name },
    h('h3', {}, h('span', {}, node.name, ' ', h('span', { class: 'muted' }, node.pool)),
      state(node.state)),
    h('div', { class: 'muted' }, `${(node.devices || []).length} devices · heartbeat `,
      ago(node.lastHeartbeatTime)),
    nodeActions(node, act),
    h('div', { class: 'gpus' }, gpus.map((g) => gpuBox(g, slicesOf.get(g.id) || [], holders))));
}

const STRATEGIES = ['', 'fgd-pack', 'fgd', 'best-fit', 'first-fit', 'spread', 'dot-product',
  'gpu-packing', 'gpu-clustering', 'random'];
const RELAYOUTS = ['MIG_RELAYOUT_OFF', 'MIG_RELAYOUT_IDLE', 'MIG_RELAYOUT_DRAIN'];

// An admin's form for a pool's policies: PATCH /v1/pools/{name} with an update mask naming just
// these fields; the API's refusal goes next to the field, the change is audited (UpdatePool).
function poolForm(p, done) {
  const field = (id, f, attrs, tag = 'input') => h(tag, { id, 'data-field': f, ...attrs });
  const strategy = field('p-strategy', 'pool.placement_strategy', {}, 'select');
  for (const s of STRATEGIES) {
    strategy.append(h('option', { value: s, selected: s === (p.placementStrategy || '') }, s || 'default'));
  }
  const compute = field('p-compute', 'pool.compute_overcommit',
    { type: 'number', step: 'any', value: String(p.computeOvercommit || 1) });
  const memory = field('p-memory', 'pool.memory_overcommit',
    { type: 'number', step: 'any', value: String(p.memoryOvercommit || 1) });
  const fair = field('p-fair', 'pool.compute_fair', { type: 'checkbox', checked: !!p.computeFair });
  const relayout = field('p-relayout', 'pool.mig_relayout', {}, 'select');
  for (const r of RELAYOUTS) {
    relayout.append(h('option', { value: r, selected: r === (p.migRelayout || 'MIG_RELAYOUT_OFF') },
      r.replace('MIG_RELAYOUT_', '').toLowerCase()));
  }
  const formError = h('p', { class: 'field-error', id: 'pool-error', role: 'alert' });
  const form = h('form', { id: 'pool-form', class: 'submit quota-form', novalidate: true,
    onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      const pool = { name: p.name, placementStrategy: strategy.value,
        computeOvercommit: Number(compute.value), memoryOvercommit: Number(memory.value),
        computeFair: fair.checked, migRelayout: relayout.value };
      try {
        await patch(`/v1/pools/${encodeURIComponent(p.name)}`, { pool, updateMask:
          'placementStrategy,computeOvercommit,memoryOvercommit,computeFair,migRelayout' });
        done();
      } catch (err) {
        formFailed(form, err, formError);
      }
    } },
  h('h2', {}, `Policies of pool ${p.name}`),
  row('placement strategy', strategy), row('compute overcommit', compute),
  row('memory overcommit', memory), row('fair compute (burst into idle time)', fair),
  row('MIG re-layout', relayout), formError,
  h('div', {}, h('button', { type: 'submit', id: 'pool-save' }, 'Save'), ' ',
    h('button', { type: 'button', onclick: () => done() }, 'Cancel')));
  return form;
}

function poolsTable(pools, edit) {
  return h('table', { id: 'pools' },
    h('thead', {}, h('tr', {}, ['pool', 'visibility', 'strategy', 'compute allocated',
      'memory allocated', ''].map((c) => h('th', {}, c)))),
    h('tbody', {}, pools.map((p) => {
      const c = p.capacity || {};
      return h('tr', { 'data-pool': p.name },
        h('td', {}, h('a', { href: `#/jobs?pool=${encodeURIComponent(p.name)}` }, p.name)),
        h('td', {}, String(p.visibility || '').replace('VISIBILITY_', '')),
        h('td', {}, p.placementStrategy || 'default'),
        h('td', {}, `${tflops(c.allocated?.milliTflops)} of ${tflops(c.offered?.milliTflops)}`),
        h('td', {}, `${vram(c.allocated?.vramMib)} of ${vram(c.offered?.vramMib)}`),
        h('td', {}, edit ? h('button', { type: 'button', class: 'edit-pool', onclick: () => edit(p) },
          'edit') : null));
    })));
}

export function poolsView() {
  const editor = h('div', { id: 'pool-editor' });
  const root = h('div', {}, h('h1', {}, 'Pools and nodes'), editor);
  const content = h('div', {});
  root.append(content);
  function edit(p) {
    replace(editor, poolForm(p, () => {
      replace(editor);
      refresh().catch(() => {});  // the shell's next refresh shows an error
    }));
  }
  async function act(path, out) {
    out.textContent = '';
    try {
      await post(path, {});
      await refresh();
    } catch (e) {
      actionFailed(e, out);
    }
  }
  async function refresh(signal) {
    const pools = (await get('/v1/pools', signal)).pools || [];
    let nodes = null;
    let nodesError = '';
    try {
      nodes = (await get('/v1/nodes', signal)).nodes || [];
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 403) throw e;
      nodesError = 'Nodes are shown to admins only.';
    }
    let holders = new Map();
    if (nodes) {
      const running = await get('/v1/jobs?state=JOB_STATE_RUNNING&pageSize=1000', signal);
      holders = holdersByDevice(running.jobs || []);
    }
    replace(content,
      // Editing is offered where nodes are shown (an admin); the API decides either way.
      pools.length ? poolsTable(pools, nodes ? edit : null) : h('p', { class: 'muted' }, 'No pools visible.'),
      h('h2', {}, 'Nodes'),
      nodes ? h('div', { class: 'nodes', id: 'nodes' }, nodes.map((n) => nodeCard(n, holders, act)))
        : h('p', { class: 'muted', id: 'nodes-hidden' }, nodesError));
  }
  return { root, refresh };
}
