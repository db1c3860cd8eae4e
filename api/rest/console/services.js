// Services (docs/services.md): each service with its replicas — how many the autoscaler wants and
// why, how many are ready, why fewer are ready than wanted (quota, capacity, preemption, a failing
// replica), and how long the last request waited for a replica to start from zero. Each replica
// links to its job. The server decides which services a credential sees: a tenant's token lists
// its own subtree only.
import { get } from './api.js';
import { h, replace, state } from './dom.js';

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
  const root = h('div', {}, h('h1', {}, 'Services'), content);
  async function refresh(signal) {
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
        replicaRows(s))));
  }
  return { root, refresh };
}
