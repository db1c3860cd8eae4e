// Price plans (docs/billing.md): each plan's newest version — currency, the tenants it rates, its
// rates, priority multipliers and preemption credit, when it took effect and who made it. A
// tenant-admin sees the plans that rate its subtree; an admin sees every plan and may write a new
// version of one (PUT /v1/priceplans/{name}: the whole plan, not a patch, effective now or at a
// later time) or create a plan (POST /v1/priceplans). The API's refusal is shown next to the field
// it names ("plan.rates[1].price: …"); each write is audited.
import { get, post, put } from './api.js';
import { h, replace, time } from './dom.js';
import { clearErrors, fieldRow, formFailed } from './form.js';

const UNITS = ['tflops-hour', 'vram-gib-hour', 'device-hour', 'mig-profile-hour',
  'spill-gib-hour', 'slot-hour'];

function rateText(r) {
  const where = [r.pool && `pool ${r.pool}`, r.model, r.migProfile].filter(Boolean).join(' · ');
  return `${r.price} per ${r.unit}` + (where ? ` (${where})` : '');
}

function multipliersText(m) {
  return Object.entries(m || {}).map(([k, v]) => `${k}=${v}`).join(', ');
}

// "batch=0.5, urgent=2" → { batch: '0.5', urgent: '2' }; a piece without '=' is kept as a key
// with an empty value, so the API names it.
function multipliersOf(text) {
  const out = {};
  for (const piece of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const at = piece.indexOf('=');
    out[at < 0 ? piece : piece.slice(0, at).trim()] = at < 0 ? '' : piece.slice(at + 1).trim();
  }
  return out;
}

// The editor of one plan: `plan` is the newest version, or null for a new plan.
function editor(plan, done) {
  const input = (id, field, value, attrs) => h('input', { id, 'data-field': field,
    value: value ?? '', ...attrs });
  const name = input('p-name', 'plan.name', plan?.name, { size: 24, readonly: !!plan });
  const currency = input('p-currency', 'plan.currency', plan?.currency || 'USD', { size: 4 });
  const description = input('p-description', 'plan.description', plan?.description, { size: 48 });
  const tenants = input('p-tenants', 'plan.tenants', (plan?.tenants || []).join(', '),
    { size: 48, placeholder: 'acme, globex/research' });
  const multipliers = input('p-multipliers', 'plan.priority_multipliers',
    multipliersText(plan?.priorityMultipliers), { size: 32, placeholder: 'batch=0.5, urgent=2' });
  const credit = input('p-credit', 'plan.preemption_credit_percent',
    plan?.preemptionCreditPercent, { size: 6, placeholder: '100' });
  const effective = input('p-effective', 'plan.effective_time', '', { type: 'datetime-local' });
  const rows = h('tbody', { id: 'p-rates' });
  let next = 0;
  function addRate(r) {
    const i = next++;
    const cell = (control) => h('td', {}, control,
      h('span', { class: 'field-error', 'data-for': control.id }));
    const unit = h('select', { id: `p-rate-${i}-unit`, 'data-field': `plan.rates[${i}].unit` },
      UNITS.map((u) => h('option', { value: u, selected: r?.unit === u }, u)));
    const row = h('tr', { class: 'rate' },
      cell(unit),
      cell(input(`p-rate-${i}-pool`, `plan.rates[${i}].pool`, r?.pool, { size: 10 })),
      cell(input(`p-rate-${i}-model`, `plan.rates[${i}].model`, r?.model, { size: 12 })),
      cell(input(`p-rate-${i}-mig`, `plan.rates[${i}].mig_profile`, r?.migProfile, { size: 8 })),
      cell(input(`p-rate-${i}-price`, `plan.rates[${i}].price`, r?.price, { size: 8 })),
      h('td', {}, h('button', { type: 'button', class: 'remove-rate',
        onclick: () => row.remove() }, 'remove')));
    rows.append(row);
  }
  for (const r of plan?.rates || []) addRate(r);
  if (!plan) addRate(null);

  // The rates in the order shown; their data-field indexes are renumbered to match, so an error
  // about plan.rates[k] lands on the k-th row on screen.
  function rates() {
    return [...rows.querySelectorAll('tr.rate')].map((row, k) => {
      for (const e of row.querySelectorAll('[data-field]')) {
        e.dataset.field = e.dataset.field.replace(/rates\[\d+\]/, `rates[${k}]`);
      }
      const v = (suffix) => row.querySelector(`[id$="-${suffix}"]`).value.trim();
      return { unit: v('unit'), pool: v('pool'), model: v('model'), migProfile: v('mig'),
        price: v('price') };
    });
  }

  const formError = h('p', { class: 'field-error', id: 'plan-error', role: 'alert' });
  const form = h('form', { id: 'plan-form', class: 'plan-form', novalidate: true,
    onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      const body = { plan: {
        name: name.value.trim(), currency: currency.value.trim(),
        description: description.value.trim(),
        tenants: tenants.value.split(',').map((s) => s.trim()).filter(Boolean),
        rates: rates(), priorityMultipliers: multipliersOf(multipliers.value),
        preemptionCreditPercent: credit.value.trim(),
      } };
      if (effective.value) body.plan.effectiveTime = new Date(effective.value).toISOString();
      try {
        if (plan) await put(`/v1/priceplans/${encodeURIComponent(plan.name)}`, body);
        else await post('/v1/priceplans', body);
        done();
      } catch (err) {
        formFailed(form, err, formError);
      }
    } },
  h('h2', {}, plan ? `New version of plan ${plan.name} (now version ${plan.version})` :
    'New price plan'),
  fieldRow('Name', name), fieldRow('Currency', currency, 'ISO 4217'),
  fieldRow('Description', description),
  fieldRow('Tenants', tenants, 'the subtrees it rates, comma-separated; "default" rates the rest'),
  h('table', {}, h('thead', {}, h('tr', {}, ['unit', 'pool', 'model or SKU', 'MIG profile',
    'price per unit-hour', ''].map((c) => h('th', {}, c)))), rows),
  h('button', { type: 'button', id: 'p-add-rate', onclick: () => addRate(null) }, 'Add a rate'),
  fieldRow('Priority multipliers', multipliers, 'class=multiplier, comma-separated'),
  fieldRow('Preemption credit %', credit, 'share of lost work credited back; empty = 100'),
  fieldRow('Takes effect', effective, 'empty: now; a version never changes hours already rated'),
  formError,
  h('button', { type: 'submit', id: 'plan-save' }, plan ? 'Save as a new version' : 'Create'), ' ',
  h('button', { type: 'button', onclick: () => done() }, 'Cancel'));
  return form;
}

export function pricePlansView() {
  const content = h('div', {});
  const edit = h('div', { id: 'plan-editor' });
  const root = h('div', {}, h('h1', {}, 'Price plans'),
    h('p', {}, h('button', { type: 'button', id: 'plan-new',
      onclick: () => replace(edit, editor(null, close)) }, 'New plan')),
    edit, content);
  function close() {
    replace(edit);
    refresh().catch(() => {});  // the shell's next refresh shows an error
  }

  async function refresh(signal) {
    const r = await get('/v1/priceplans', signal);
    const plans = r.plans || [];
    replace(content, plans.length === 0 ? h('p', { class: 'muted' }, 'No price plans visible.') :
      plans.map((p) => h('section', { class: 'plan', 'data-plan': p.name },
        h('h2', {}, `${p.name} · version ${p.version} · ${p.currency}`),
        p.description ? h('p', {}, p.description) : null,
        h('p', { class: 'muted' }, `in effect from ${time(p.effectiveTime)}` +
          (p.createdBy ? `, made by ${p.createdBy}` : '')),
        h('p', {}, 'Rates ', (p.tenants || []).length ? (p.tenants || []).join(', ') :
          (p.name === 'default' ? 'every tenant no other plan lists' : 'no tenant')),
        h('ul', { class: 'rates' }, (p.rates || []).map((x) => h('li', {}, rateText(x)))),
        Object.keys(p.priorityMultipliers || {}).length ?
          h('p', {}, 'Priority multipliers: ' + multipliersText(p.priorityMultipliers)) : null,
        h('p', {}, `Preemption credit: ${p.preemptionCreditPercent || '100'} %`),
        h('button', { type: 'button', class: 'edit-plan',
          onclick: () => replace(edit, editor(p, close)) }, 'New version…'))));
  }
  return { root, refresh };
}
