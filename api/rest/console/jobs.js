// Jobs: a table filtered by state, tenant and pool (kept in the URL fragment, so a filtered view
// can be bookmarked), each job linking to its page. The server decides which jobs a credential
// sees: a tenant's token lists its own subtree only.
import { get, q } from './api.js';
import { h, replace, state, ago } from './dom.js';

const STATES = ['', 'JOB_STATE_PENDING', 'JOB_STATE_RUNNING', 'JOB_STATE_SUCCEEDED',
  'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED'];

function taskSummary(job) {
  const counts = new Map();
  for (const t of job.tasks || []) {
    const s = String(t.state).replace('TASK_STATE_', '').toLowerCase();
    counts.set(s, (counts.get(s) || 0) + 1);
  }
  return [...counts].map(([s, n]) => `${n} ${s}`).join(', ');
}

// Why the job is where it is: its own reason, else the first waiting or preempted task's.
export function jobReason(job) {
  if (job.reason) return job.reason;
  const t = (job.tasks || []).find((x) => x.reason &&
    ['TASK_STATE_PENDING', 'TASK_STATE_PREEMPTED'].includes(x.state));
  return t ? t.reason : '';
}

function commandOf(job) { return (job.spec?.template?.command || []).join(' '); }

export function jobsView(params, navigate) {
  const f = { state: params.get('state') || '', tenant: params.get('tenant') || '',
    pool: params.get('pool') || '' };
  const apply = () => navigate('#/jobs' + q(f));
  const stateSel = h('select', { id: 'f-state', onchange: (e) => { f.state = e.target.value; apply(); } },
    STATES.map((s) => h('option', { value: s, selected: s === f.state },
      s ? s.replace('JOB_STATE_', '').toLowerCase() : 'any')));
  const tenant = h('input', { id: 'f-tenant', value: f.tenant, placeholder: 'acme/research' ,
    onchange: (e) => { f.tenant = e.target.value.trim(); apply(); } });
  const pool = h('input', { id: 'f-pool', value: f.pool, placeholder: 'any',
    onchange: (e) => { f.pool = e.target.value.trim(); apply(); } });
  const content = h('div', {});
  const root = h('div', {}, h('h1', {}, 'Jobs'),
    h('div', { class: 'filters' },
      h('label', {}, 'state', stateSel), h('label', {}, 'tenant (and below)', tenant),
      h('label', {}, 'pool', pool)),
    content);

  async function refresh(signal) {
    const resp = await get('/v1/jobs' + q({ ...f, pageSize: 500 }), signal);
    const jobs = resp.jobs || [];
    replace(content, jobs.length === 0 ? h('p', { class: 'muted', id: 'no-jobs' }, 'No jobs.') :
      h('table', { id: 'jobs' },
        h('thead', {}, h('tr', {}, ['job', 'tenant', 'pool', 'state', 'tasks', 'command',
          'submitted', 'why'].map((c) => h('th', {}, c)))),
        h('tbody', {}, jobs.map((j) => h('tr', { 'data-job': j.id },
          h('td', { class: 'mono' }, h('a', { href: `#/jobs/${encodeURIComponent(j.id)}` }, j.id)),
          h('td', { class: 'tenant' }, j.spec?.tenant || ''),
          h('td', {}, j.spec?.pool || ''),
          h('td', {}, state(j.state)),
          h('td', {}, taskSummary(j)),
          h('td', { class: 'mono' }, commandOf(j).slice(0, 80)),
          h('td', { title: j.submitTime || '' }, ago(j.submitTime)),
          h('td', { class: 'reason' }, jobReason(j)))))),
      resp.nextPageToken ? h('p', { class: 'muted' }, 'Showing the first 500 jobs.') : null);
  }
  return { root, refresh };
}
