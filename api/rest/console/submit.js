// Submit a job: the form a tenant fills instead of writing JSON. What it sends is what
// `gpupoolctl jobs submit` sends (POST /v1/jobs with the signed-in credential), so the API does
// every check; its message names the field at fault ("spec.template.resources.fractional…: must
// be > 0") and is shown next to that field. The form is kept in this tab's sessionStorage as it
// is typed, so a session that expires (a 401 sends the user to sign in) comes back to it intact.
import { post } from './api.js';
import { h } from './dom.js';
import { clearErrors, fieldRow as row, formFailed } from './form.js';

const DRAFT = 'gpupool.draft.submit';
const KINDS = [['fractional', 'a slice of one GPU'], ['whole', 'whole GPUs'], ['mig', 'a MIG instance'],
  ['sku', 'a SKU']];

// "KEY=VALUE" lines → { KEY: VALUE }; blank lines ignored.
function pairs(text) {
  const out = {};
  for (const line of String(text || '').split('\n')) {
    const t = line.trim();
    if (!t) continue;
    const eq = t.indexOf('=');
    out[eq < 0 ? t : t.slice(0, eq)] = eq < 0 ? '' : t.slice(eq + 1);
  }
  return out;
}

// The form's values as the API's JobSpec (JSON mapping of jobs.proto).
export function specOf(v) {
  const resources = {};
  if (v.kind === 'whole') {
    resources.wholeGpus = { count: Number(v.gpus || 0) };
    const models = String(v.models || '').split(',').map((m) => m.trim()).filter(Boolean);
    if (models.length) resources.wholeGpus.models = models;
  } else if (v.kind === 'mig') {
    resources.mig = { profile: v.mig || '' };
  } else if (v.kind === 'sku') {
    resources.sku = { name: v.sku || '' };
  } else {
    resources.fractional = { milliTflops: String(Math.round(Number(v.tflops || 0) * 1000)),
      vramMib: String(Math.round(Number(v.vram || 0) * 1024)) };
  }
  const template = { resources };
  if (v.command) template.command = ['/bin/sh', '-c', v.command];
  if (v.image) template.image = v.image;
  const env = pairs(v.env);
  if (Object.keys(env).length) template.env = env;
  const secrets = pairs(v.secrets);
  if (Object.keys(secrets).length) template.secretEnv = secrets;
  const spec = { tenant: v.tenant, pool: v.pool, taskCount: Number(v.count || 1), template };
  if (v.priority) spec.priorityClass = v.priority;
  return spec;
}

// A word as /bin/sh reads it back: bare when safe, else in single quotes.
function shellWord(w) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`;
}

// The form's values for a job that ran before (*Re-run…* on its page): its spec, with each
// secret's name kept and its value left for the user to give again — the API never shows a
// secret back (it answers "[redacted]"), so a re-run must not send that text as the value.
export function draftFrom(job) {
  const spec = job.spec || {};
  const t = spec.template || {};
  const r = t.resources || {};
  const argv = t.command || [];
  const v = { tenant: spec.tenant || '', pool: spec.pool || '', priority: spec.priorityClass || '',
    count: String(spec.taskCount || 1), image: t.image || '',
    command: argv.length === 3 && argv[0] === '/bin/sh' && argv[1] === '-c' ? argv[2]
      : argv.map(shellWord).join(' '),
    env: Object.entries(t.env || {}).map(([k, x]) => `${k}=${x}`).join('\n'),
    secrets: Object.keys(t.secretEnv || {}).map((k) => `${k}=`).join('\n') };
  if (r.wholeGpus) {
    Object.assign(v, { kind: 'whole', gpus: String(r.wholeGpus.count || 1),
      models: (r.wholeGpus.models || []).join(', ') });
  } else if (r.mig) {
    Object.assign(v, { kind: 'mig', mig: r.mig.profile || '' });
  } else if (r.sku) {
    Object.assign(v, { kind: 'sku', sku: r.sku.name || '' });
  } else {
    Object.assign(v, { kind: 'fractional',
      tflops: String(Number(r.fractional?.milliTflops || 0) / 1000),
      vram: String(Number(r.fractional?.vramMib || 0) / 1024) });
  }
  return v;
}
export function saveDraft(v) { sessionStorage.setItem(DRAFT, JSON.stringify(v)); }

// The resources of a task template as inputs: a kind chooser and, per kind, its group (a slice
// of one GPU, whole GPUs with allowed models, a MIG profile, a SKU), only the chosen one shown.
// `input(name, field, attrs)` makes an input bound to v[name]; `prefix` is the template's API
// name ("spec.template", "service.template"), so a refusal lands on its input; `changed` runs
// when the kind changes.
export function resourceInputs(input, idPrefix, prefix, v, changed) {
  const r = `${prefix}.resources`;
  const groups = {
    fractional: h('div', { class: 'group' },
      row('TFLOPS', input('tflops', `${r}.fractional`, { type: 'number', step: 'any', min: '0' })),
      row('VRAM (GiB)', input('vram', `${r}.fractional.vram_mib`, { type: 'number', step: 'any', min: '0' }))),
    whole: h('div', { class: 'group' },
      row('GPUs', input('gpus', `${r}.whole_gpus.count`, { type: 'number', min: '1' })),
      row('models', input('models', `${r}.whole_gpus.models`, { placeholder: 'any (or H100-SXM, A100-80GB)' }))),
    mig: h('div', { class: 'group' },
      row('profile', input('mig', `${r}.mig`, { placeholder: '3g.40gb' }))),
    sku: h('div', { class: 'group' },
      row('SKU', input('sku', `${r}.sku`, { placeholder: 'medium' }))),
  };
  const showKind = () => { for (const [k, g] of Object.entries(groups)) g.hidden = k !== v.kind; };
  const kind = h('select', { id: `${idPrefix}-kind`, 'data-field': r,
    onchange: (e) => { v.kind = e.target.value; changed(); showKind(); } },
  KINDS.map(([k, text]) => h('option', { value: k, selected: k === v.kind }, text)));
  showKind();
  return { groups, kind };
}

export function submitView(navigate) {
  const saved = JSON.parse(sessionStorage.getItem(DRAFT) || '{}');
  const v = { kind: 'fractional', count: '1', tflops: '10', vram: '8', gpus: '1', ...saved };
  const save = () => sessionStorage.setItem(DRAFT, JSON.stringify(v));
  // An input bound to v[name]; `field` is the API's name for it, which its errors start with.
  function input(name, field, attrs = {}, tag = 'input') {
    const e = h(tag, { id: 's-' + name, name, 'data-field': field, ...attrs,
      oninput: (ev) => { v[name] = ev.target.value; save(); } });
    e.value = v[name] ?? '';
    return e;
  }
  const { groups, kind } = resourceInputs(input, 's', 'spec.template', v, save);
  const formError = h('p', { class: 'field-error', id: 'submit-error', role: 'alert' });
  const button = h('button', { type: 'submit', id: 's-submit' }, 'Submit');

  const form = h('form', { id: 'submit', class: 'submit', novalidate: true,
    onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      button.disabled = true;
      try {
        const r = await post('/v1/jobs', { spec: specOf(v) });
        sessionStorage.removeItem(DRAFT);
        navigate('#/jobs/' + encodeURIComponent(r.jobId));
      } catch (err) {
        formFailed(form, err, formError);
      } finally {
        button.disabled = false;
      }
    } },
  row('tenant', input('tenant', 'spec.tenant', { placeholder: 'acme/research/alice', required: true })),
  row('pool', input('pool', 'spec.pool', { placeholder: 'gpu', required: true })),
  row('priority class', input('priority', 'spec.priority_class', { placeholder: 'default' })),
  row('tasks', input('count', 'spec.task_count', { type: 'number', min: '1' })),
  row('image', input('image', 'spec.template.image', { placeholder: 'none: a command on the node' })),
  row('command', input('command', 'spec.template.command', { placeholder: 'python train.py', size: 60 }),
    'run with /bin/sh -c'),
  row('resources', kind), groups.fractional, groups.whole, groups.mig, groups.sku,
  row('env', input('env', 'spec.template.env', { rows: 3, placeholder: 'KEY=VALUE per line' }, 'textarea')),
  row('secrets', input('secrets', 'spec.template.secret_env', { rows: 2, placeholder: 'KEY=VALUE per line (never shown again)' }, 'textarea')),
  formError, button);
  const root = h('div', {}, h('h1', {}, 'Submit a job'), form);
  // Nothing to load: the view is ready at once (the shell's refresh calls this).
  async function refresh() {}
  return { root, refresh };
}
