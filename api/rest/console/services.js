// Services (docs/services.md): each service with its replicas — how many the autoscaler wants and
// why, how many are ready, why fewer are ready than wanted (quota, capacity, preemption, a failing
// replica), and how long the last request waited for a replica to start from zero. Each replica
// links to its job. The server decides which services a credential sees: a tenant's token lists
// its own subtree only.
//
// A member manages its services here through the same API as `gpupoolctl services`: *New service*
// (POST /v1/services: a task template as on the submit form, the port the replicas serve and the
// path that says they are ready, the replica range), *Scale…* (PUT of the service with a new range;
// its replicas are not rolled), *Roll back* (to the previous template), *Delete* (asked twice).
// The API's refusal is shown next to the field it names.
import { del, get, post, put } from './api.js';
import { h, replace, state } from './dom.js';
import { actionFailed, clearErrors, fieldRow as row, formFailed } from './form.js';
import { resourceInputs, specOf } from './submit.js';

// Fields the server fills: not sent back with an update.
const OUTPUT = ['id', 'generation', 'hasPrevious', 'status', 'createdBy', 'createTime', 'updateTime'];
function specOfService(s) {
  const out = { ...s };
  for (const k of OUTPUT) delete out[k];
  return out;
}
function servicePath(s) {
  return `/v1/services/${encodeURIComponent(s.tenant)}/${encodeURIComponent(s.name)}`;
}

// The new-service form; `done` closes it.
function newServiceForm(done) {
  const v = { kind: 'fractional', tflops: '10', vram: '8', gpus: '1', min: '1', max: '1',
    port: '8080', path: '/' };
  function input(name, field, attrs = {}) {
    const e = h('input', { id: 'v-' + name, 'data-field': field, ...attrs,
      oninput: (ev) => { v[name] = ev.target.value; } });
    e.value = v[name] ?? '';
    return e;
  }
  const { groups, kind } = resourceInputs(input, 'v', 'service.template', v, () => {});
  const formError = h('p', { class: 'field-error', id: 'service-error', role: 'alert' });
  const form = h('form', { id: 'service-form', class: 'submit', novalidate: true,
    onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      const port = Number(v.port || 0);
      const template = specOf(v).template;
      template.ports = [{ port, name: 'http' }];
      try {
        await post('/v1/services', { service: { name: v.name || '', tenant: v.tenant || '',
          pool: v.pool || '', template, port, readinessPath: v.path || '',
          minReplicas: Number(v.min || 0), maxReplicas: Number(v.max || 0) } });
        done();
      } catch (err) {
        formFailed(form, err, formError);
      }
    } },
  h('h2', {}, 'New service'),
  row('tenant', input('tenant', 'service.tenant', { placeholder: 'acme/research' })),
  row('name', input('name', 'service.name', { placeholder: 'chat' })),
  row('pool', input('pool', 'service.pool', { placeholder: 'gpu' })),
  row('image', input('image', 'service.template.image', { placeholder: 'none: a command on the node' })),
  row('command', input('command', 'service.template.command', { size: 60 }), 'run with /bin/sh -c'),
  row('resources', kind), Object.values(groups),
  row('port', input('port', 'service.port', { type: 'number', min: '1' }), 'where each replica serves'),
  row('readiness path', input('path', 'service.readiness_path'), 'answers 2xx when ready'),
  row('replicas, at least', input('min', 'service.min_replicas', { type: 'number', min: '0' }),
    '0: scale to zero when idle'),
  row('replicas, at most', input('max', 'service.max_replicas', { type: 'number', min: '1' })),
  formError,
  h('button', { type: 'submit', id: 'v-create' }, 'Create'), ' ',
  h('button', { type: 'button', onclick: () => done() }, 'Cancel'));
  return form;
}

// *Scale…*, *Roll back* and *Delete* of one service; `changed` re-reads the list.
function actions(s, changed) {
  const out = h('span', { class: 'field-error action-error' });
  const box = h('div', { class: 'service-actions' });
  const act = (fn) => async () => {
    out.textContent = '';
    try {
      await fn();
      buttons();  // the prompt is done: the list may be re-drawn
      changed();
    } catch (err) {
      actionFailed(err, out);
    }
  };
  function scaleForm() {
    const min = h('input', { class: 'scale-min', 'data-field': 'service.min_replicas', type: 'number',
      min: '0', value: String(s.minReplicas || 0), size: 4 });
    const max = h('input', { class: 'scale-max', 'data-field': 'service.max_replicas', type: 'number',
      min: '1', value: String(s.maxReplicas || 0), size: 4 });
    replace(box, 'replicas ', min, ' .. ', max, ' ',
      h('button', { type: 'button', class: 'scale-save', onclick: act(() => put(servicePath(s),
        { service: { ...specOfService(s), minReplicas: Number(min.value),
          maxReplicas: Number(max.value) } })) }, 'Save'), ' ',
      h('button', { type: 'button', onclick: () => buttons() }, 'Cancel'), out);
  }
  function confirmDelete() {
    replace(box, `Delete ${s.name} and stop its replicas? `,
      h('button', { type: 'button', class: 'delete-confirm',
        onclick: act(() => del(servicePath(s))) }, 'Delete service'), ' ',
      h('button', { type: 'button', onclick: () => buttons() }, 'Keep'), out);
  }
  function buttons() {
    replace(box,
      h('button', { type: 'button', class: 'scale', onclick: scaleForm }, 'Scale…'), ' ',
      s.hasPrevious ? [h('button', { type: 'button', class: 'rollback',
        onclick: act(() => post(servicePath(s) + ':rollback', {})) }, 'Roll back'), ' '] : null,
      h('button', { type: 'button', class: 'delete', onclick: confirmDelete }, 'Delete…'), out);
  }
  buttons();
  return box;
}

// "1.250s" (protobuf's JSON Duration) → "1.25 s"; "" when unset.
function seconds(d) {
  if (!d) return '';
  const n = Number(String(d).replace(/s$/, ''));
  return Number.isFinite(n) ? `${n.toFixed(2).replace(/\.?0+$/, '')} s` : '';
}

function revision(s) {
  return `${s.generation || 1}` + (s.hasPrevious ? ' (can roll back)' : '');
}

function replicaRows(s) {
  const replicas = s.status?.replicas || [];
  if (replicas.length === 0) return h('p', { class: 'muted' }, 'No replicas.');
  return h('table', { class: 'replicas' },
    h('thead', {}, h('tr', {}, ['job', 'generation', 'state', 'ready', 'node', 'endpoints',
      'why'].map((c) => h('th', {}, c)))),
    h('tbody', {}, replicas.map((r) => h('tr', { 'data-replica': r.jobId },
      h('td', { class: 'mono' }, h('a', { href: `#/jobs/${encodeURIComponent(r.jobId)}` }, r.jobId)),
      h('td', {}, r.generation || ''),
      h('td', {}, state(r.state)),
      h('td', { class: r.ready ? 'ready' : 'not-ready' }, r.ready ? 'yes' : 'no'),
      h('td', {}, r.node || ''),
      h('td', { class: 'mono' }, (r.endpoints || []).map((e) => `${e.host}:${e.hostPort}`).join(' ')),
      h('td', { class: 'reason' }, r.reason || '')))));
}

export function servicesView() {
  const content = h('div', {});
  const editor = h('div', { id: 'service-editor' });
  const root = h('div', {}, h('h1', {}, 'Services'),
    h('p', {}, h('button', { type: 'button', id: 'service-new',
      onclick: () => replace(editor, newServiceForm(close)) }, 'New service')),
    editor, content);
  function close() {
    replace(editor);
    refresh().catch(() => {});  // the shell's next refresh shows an error
  }
  async function refresh(signal) {
    // An open scale or delete prompt survives the live refresh: nothing is re-drawn under it.
    if (content.querySelector('.service-actions input, .delete-confirm')) return;
    const resp = await get('/v1/services', signal);
    const services = resp.services || [];
    if (services.length === 0) {
      replace(content, h('p', { class: 'muted', id: 'no-services' }, 'No services.'));
      return;
    }
    replace(content,
      h('table', { id: 'services' },
        h('thead', {}, h('tr', {}, ['service', 'tenant', 'pool', 'revision', 'ready / desired',
          'replicas', 'cold starts', 'last cold start', 'why short'].map((c) => h('th', {}, c)))),
        h('tbody', {}, services.map((s) => {
          const st = s.status || {};
          const short = st.belowCode ? `${st.belowCode}: ${st.belowReason || ''}` : '';
          return h('tr', { 'data-service': `${s.tenant}/${s.name}` },
            h('td', { class: 'mono' }, s.name),
            h('td', { class: 'tenant' }, s.tenant),
            h('td', {}, s.pool),
            h('td', {}, revision(s)),
            h('td', { class: 'counts', title: st.desiredReason || '' },
              `${st.ready || 0} / ${st.desired || 0}`),
            h('td', {}, `${s.minReplicas || 0}..${s.maxReplicas || 0}`),
            h('td', {}, String(st.coldStarts || 0)),
            h('td', {}, seconds(st.lastColdStart)),
            h('td', { class: 'reason below' }, short));
        }))),
      services.map((s) => h('section', { class: 'service', 'data-service': `${s.tenant}/${s.name}` },
        h('h2', {}, `${s.name} `, h('span', { class: 'muted' }, `of ${s.tenant}`)),
        h('p', { class: 'muted desired-reason' }, s.status?.desiredReason || ''),
        actions(s, close),
        replicaRows(s))));
  }
  return { root, refresh };
}
