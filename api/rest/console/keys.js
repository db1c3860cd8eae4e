// API keys: the credential's own and its subtree's (GET /v1/apikeys; an admin sees every key),
// a form to create one, and a Revoke button per live key. A new key's secret is in the creation
// answer only: it is shown once here, in a box the page drops when it is left, and never again.
import { get, post } from './api.js';
import { h, replace, time } from './dom.js';
import { actionFailed, clearErrors, fieldRow as row, formFailed } from './form.js';

const ROLES = ['viewer', 'member', 'tenant-admin', 'admin'];

export function keysView() {
  const list = h('div', {});
  const fresh = h('div', { id: 'new-key' });
  const formError = h('p', { class: 'field-error', id: 'key-error', role: 'alert' });
  const field = (id, f, attrs = {}, tag = 'input') => h(tag, { id, 'data-field': f, ...attrs });
  const name = field('k-name', 'key.name', { placeholder: 'ci-pipeline' });
  const tenant = field('k-tenant', 'key.tenant', { placeholder: 'acme/research (empty: admin)' });
  const role = field('k-role', 'key.role', {}, 'select');
  for (const r of ROLES) role.append(h('option', { value: r, selected: r === 'member' }, r));
  const days = field('k-days', 'key.expire_time', { type: 'number', min: '1', placeholder: 'never' });
  const button = h('button', { type: 'submit', id: 'k-create' }, 'Create key');

  const form = h('form', { id: 'key-form', class: 'submit', novalidate: true,
    onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      replace(fresh);
      button.disabled = true;
      const key = { name: name.value.trim(), tenant: tenant.value.trim(), role: role.value };
      if (days.value) {
        key.expireTime = new Date(Date.now() + Number(days.value) * 86400e3).toISOString();
      }
      try {
        const r = await post('/v1/apikeys', { key });
        replace(fresh, h('div', { class: 'secret-box' },
          h('p', {}, `Key ${r.key.id} (${r.key.name}) created. Copy it now: it is never shown again.`),
          h('code', { id: 'new-key-secret', class: 'mono' }, r.secret)));
        name.value = '';
        await refresh();
      } catch (err) {
        formFailed(form, err, formError);
      } finally {
        button.disabled = false;
      }
    } },
  row('name', name), row('tenant', tenant), row('role', role), row('expires in (days)', days),
  formError, button);

  async function revoke(id, out) {
    out.textContent = '';
    try {
      await post(`/v1/apikeys/${encodeURIComponent(id)}:revoke`, {});
      await refresh();
    } catch (e) {
      actionFailed(e, out);
    }
  }

  async function refresh(signal) {
    const keys = (await get('/v1/apikeys', signal)).keys || [];
    replace(list, keys.length === 0 ? h('p', { class: 'muted', id: 'no-keys' }, 'No keys.') :
      h('table', { id: 'keys' },
        h('thead', {}, h('tr', {}, ['id', 'name', 'tenant', 'role', 'created', 'expires',
          'state', ''].map((c) => h('th', {}, c)))),
        h('tbody', {}, keys.map((k) => {
          const out = h('span', { class: 'field-error' });
          return h('tr', { 'data-key': k.id },
            h('td', { class: 'mono' }, k.id), h('td', {}, k.name), h('td', {}, k.tenant || '(admin)'),
            h('td', {}, k.role), h('td', {}, time(k.createTime)),
            h('td', {}, k.expireTime ? time(k.expireTime) : 'never'),
            h('td', { class: 'key-state' }, k.revokeTime ? 'revoked ' + time(k.revokeTime) : 'live'),
            h('td', {}, k.revokeTime ? null : h('button', { type: 'button', class: 'danger revoke',
              onclick: () => revoke(k.id, out) }, 'Revoke'), out));
        }))));
  }
  const root = h('div', {}, h('h1', {}, 'API keys'), fresh, list, h('h2', {}, 'New key'), form);
  return { root, refresh };
}
