// Tenants and quotas: per tenant and pool, what is guaranteed, what is held now (used) and the
// part of it beyond the guarantee (borrowed), in each of the three dimensions (docs/tenancy.md).
// A tenant's token sees its own subtree; an admin sees all. *edit* opens a form that replaces the
// quota (PUT /v1/quotas/{tenant}/{pool}, admins only; the API's refusal is shown next to the
// field it names, and the change is audited as SetQuota).
import { get, put } from './api.js';
import { h, replace, tflops, vram, pct } from './dom.js';
import { clearErrors, formFailed } from './form.js';

function amount(a) {
  a = a || {};
  if (a.sku) return `${a.skuCount} × ${a.sku}`;
  const r = a.resources || {};
  const parts = [];
  if (Number(r.milliTflops)) parts.push(tflops(r.milliTflops));
  if (Number(r.vramMib)) parts.push(vram(r.vramMib));
  if (Number(a.devices)) parts.push(`${a.devices} devices`);
  return parts.join(' · ') || '—';
}

function meter(used, guaranteed) {
  const u = Number(used?.resources?.milliTflops || 0);
  const g = Number(guaranteed?.resources?.milliTflops || 0);
  if (!g) return '';
  return h('span', { class: 'meter' }, h('span', { class: 'bar' },
    h('span', { style: { width: pct(u, g) + '%', background: u > g ? '#b26a00' : '#2e7d32' } })));
}

// The inputs of one side of a quota (guaranteed or limit): TFLOPS, VRAM GiB, devices.
function amountInputs(side, a) {
  const r = a?.resources || {};
  const field = (name, f, value) => h('input', { id: `q-${side}-${name}`, 'data-field': f,
    type: 'number', min: '0', step: 'any', value: String(value), size: 8 });
  return {
    tflops: field('tflops', `quota.${side}.resources.milli_tflops`, Number(r.milliTflops || 0) / 1000),
    vram: field('vram', `quota.${side}.resources.vram_mib`, Number(r.vramMib || 0) / 1024),
    devices: field('devices', `quota.${side}.devices`, Number(a?.devices || 0)),
  };
}
function amountOf(i) {
  return { resources: { milliTflops: String(Math.round(Number(i.tflops.value || 0) * 1000)),
    vramMib: String(Math.round(Number(i.vram.value || 0) * 1024)) },
  devices: Number(i.devices.value || 0) };
}

export function tenantsView() {
  const content = h('div', {});
  const editor = h('div', { id: 'quota-editor' });
  const root = h('div', {}, h('h1', {}, 'Tenants and quotas'), editor, content);

  function edit(x) {
    const g = amountInputs('guaranteed', x.guaranteed);
    const l = amountInputs('limit', x.limit);
    const formError = h('p', { class: 'field-error', id: 'quota-error', role: 'alert' });
    const cell = (i) => [i, h('span', { class: 'field-error', 'data-for': i.id })];
    const form = h('form', { id: 'quota-form', class: 'quota-form', novalidate: true,
      onsubmit: async (e) => {
        e.preventDefault();
        clearErrors(form);
        try {
          await put(`/v1/quotas/${encodeURIComponent(x.tenant)}/${encodeURIComponent(x.pool)}`,
            { quota: { tenant: x.tenant, pool: x.pool, guaranteed: amountOf(g), limit: amountOf(l) } });
          close();
        } catch (err) {
          formFailed(form, err, formError);
        }
      } },
    h('h2', {}, `Quota of ${x.tenant} in pool ${x.pool}`),
    h('table', {},
      h('thead', {}, h('tr', {}, ['', 'TFLOPS', 'VRAM (GiB)', 'devices'].map((c) => h('th', {}, c)))),
      h('tbody', {},
        h('tr', {}, h('th', {}, 'guaranteed'), h('td', {}, cell(g.tflops)), h('td', {}, cell(g.vram)),
          h('td', {}, cell(g.devices))),
        h('tr', {}, h('th', {}, 'limit (0: none)'), h('td', {}, cell(l.tflops)), h('td', {}, cell(l.vram)),
          h('td', {}, cell(l.devices))))),
    formError,
    h('button', { type: 'submit', id: 'quota-save' }, 'Save'), ' ',
    h('button', { type: 'button', onclick: () => close() }, 'Cancel'));
    replace(editor, form);
  }
  function close() {
    replace(editor);
    refresh().catch(() => {});  // the shell's next refresh shows an error
  }

  async function refresh(signal) {
    const [quotas, tenants] = await Promise.all([get('/v1/quotas', signal),
      get('/v1/tenants', signal)]);
    const withQuota = new Set((quotas.quotas || []).map((x) => x.tenant));
    const bare = (tenants.tenants || []).filter((t) => !withQuota.has(t.path));
    replace(content,
      (quotas.quotas || []).length === 0 ? h('p', { class: 'muted' }, 'No quotas visible.') :
        h('table', { id: 'quotas' },
          h('thead', {}, h('tr', {}, ['tenant', 'pool', 'guaranteed', 'limit', 'used', '',
            'borrowed', ''].map((c) => h('th', {}, c)))),
          h('tbody', {}, quotas.quotas.map((x) => {
            const borrowing = Number(x.borrowed?.resources?.milliTflops || 0) > 0 ||
              Number(x.borrowed?.devices || 0) > 0;
            return h('tr', { 'data-quota': `${x.tenant}@${x.pool}` },
              h('td', {}, h('a', { href: `#/jobs?tenant=${encodeURIComponent(x.tenant)}` }, x.tenant)),
              h('td', {}, x.pool),
              h('td', {}, amount(x.guaranteed)),
              h('td', {}, amount(x.limit)),
              h('td', {}, amount(x.used)),
              h('td', {}, meter(x.used, x.guaranteed)),
              h('td', { class: borrowing ? 'over' : '' }, amount(x.borrowed)),
              h('td', {}, h('button', { type: 'button', class: 'edit-quota',
                onclick: () => edit(x) }, 'edit')));
          }))),
      bare.length ? [h('h2', {}, 'Tenants without a quota'),
        h('ul', {}, bare.map((t) => h('li', {}, t.path)))] : null);
  }
  return { root, refresh };
}
