// The audit log (GET /v1/audit): who did what, to what, and with which outcome, newest first,
// filtered by verb, principal, resource prefix and outcome (kept in the URL fragment, so a
// filtered view can be bookmarked). Whom it shows is the server's rule (docs/security.md).
import { get, q } from './api.js';
import { h, replace, time } from './dom.js';

export function auditView(params, navigate) {
  const f = { verb: params.get('verb') || '', principal: params.get('principal') || '',
    resource: params.get('resource') || '', outcome: params.get('outcome') || '' };
  const apply = () => navigate('#/audit' + q(f));
  const filter = (name, placeholder) => h('label', {}, name, h('input', { id: 'a-' + name,
    value: f[name], placeholder, onchange: (e) => { f[name] = e.target.value.trim(); apply(); } }));
  const content = h('div', {});
  const root = h('div', {}, h('h1', {}, 'Audit log'),
    h('div', { class: 'filters' }, filter('verb', 'SetQuota'), filter('principal', 'key:…'),
      filter('resource', 'quota/acme'), filter('outcome', 'PERMISSION_DENIED')),
    content);
  async function refresh(signal) {
    const resp = await get('/v1/audit' + q({ ...f, pageSize: 200 }), signal);
    const records = resp.records || [];
    replace(content, records.length === 0 ? h('p', { class: 'muted', id: 'no-audit' }, 'No records.') :
      h('table', { id: 'audit' },
        h('thead', {}, h('tr', {}, ['time', 'principal', 'role', 'verb', 'resource', 'outcome',
          'message'].map((c) => h('th', {}, c)))),
        h('tbody', {}, records.map((r) => h('tr', { 'data-verb': r.verb },
          h('td', {}, time(r.time)), h('td', { class: 'mono' }, r.principal), h('td', {}, r.role),
          h('td', {}, r.verb), h('td', { class: 'mono resource' }, r.resource),
          h('td', { class: r.outcome === 'OK' ? '' : 'over' }, r.outcome),
          h('td', { class: 'reason' }, r.message))))));
  }
  return { root, refresh };
}
