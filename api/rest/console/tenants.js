// Tenants and quotas: per tenant and pool, what is guaranteed, what is held now (used) and the
// part of it beyond the guarantee (borrowed), in each of the three dimensions (docs/tenancy.md).
// A tenant's token sees its own subtree; an admin sees all.
import { get } from './api.js';
import { h, replace, tflops, vram, pct } from './dom.js';

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

export function tenantsView() {
  const content = h('div', {});
  const root = h('div', {}, h('h1', {}, 'Tenants and quotas'), content);
  async function refresh(signal) {
    const [quotas, tenants] = await Promise.all([get('/v1/quotas', signal),
      get('/v1/tenants', signal)]);
    const withQuota = new Set((quotas.quotas || []).map((x) => x.tenant));
    const bare = (tenants.tenants || []).filter((t) => !withQuota.has(t.path));
    replace(content,
      (quotas.quotas || []).length === 0 ? h('p', { class: 'muted' }, 'No quotas visible.') :
        h('table', { id: 'quotas' },
          h('thead', {}, h('tr', {}, ['tenant', 'pool', 'guaranteed', 'limit', 'used', '',
            'borrowed'].map((c) => h('th', {}, c)))),
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
              h('td', { class: borrowing ? 'over' : '' }, amount(x.borrowed)));
          }))),
      bare.length ? [h('h2', {}, 'Tenants without a quota'),
        h('ul', {}, bare.map((t) => h('li', {}, t.path)))] : null);
  }
  return { root, refresh };
}
