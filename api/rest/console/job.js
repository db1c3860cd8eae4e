// One job: its spec, state and reason, every task with why it is pending or preempted (the
// task's `reason`, the scheduler's diagnosis), and a task's logs streamed from
// GET /v1/tasks/{id}/logs (follow while it runs).
//
// Live updates: the page holds GET /v1/jobs/{id}:watch open and redraws the job from each event
// the server pushes (the event carries the whole job), listing what changed under "Events". While
// the watch is open the periodic refresh leaves the job alone; when it ends (the job finished,
// the server restarted, the network dropped) the page says so and falls back to polling.
import { get, post, stream } from './api.js';
import { actionFailed } from './form.js';
import { draftFrom, saveDraft } from './submit.js';
import { h, replace, state, tflops, vram, time } from './dom.js';
import { jobReason } from './jobs.js';

function resources(spec) {
  const r = spec?.template?.resources || {};
  if (r.wholeGpus) {
    const models = (r.wholeGpus.models || []).join('|');
    return `${r.wholeGpus.count} whole GPU(s)${models ? ' of ' + models : ''}`;
  }
  if (r.fractional) return `${tflops(r.fractional.milliTflops)}, ${vram(r.fractional.vramMib)} of one GPU`;
  if (r.mig) return `MIG ${r.mig.profile}`;
  if (r.sku) return `SKU ${r.sku.name}`;
  return '';
}

function decode(b64) {
  const bin = atob(b64 || '');
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}


// A PULLING task: its node's image pull, bytes fetched of those it must (int64s come as
// strings in the JSON mapping).
function pullText(t) {
  const done = Number(t.pull.bytesDone || 0);
  const total = Number(t.pull.bytesTotal || 0);
  const mib = (b) => (b / 1048576).toFixed(1);
  const pct = total > 0 ? Math.floor((100 * done) / total) : 0;
  return `pulling ${t.pull.image} on ${t.node}: ${mib(done)} of ${mib(total)} MiB (${pct}%)`;
}
// A RUNNING task's published ports (docs/network.md, "Published ports"): where each is reached.
function endpointsOf(t) {
  return (t.endpoints || []).map((e) => h('div', { class: 'mono endpoint' },
    `${e.port}/${e.protocol}${e.name ? ` (${e.name})` : ''} → ${e.host}:${e.hostPort}`));
}

export function jobView(jobId) {
  const content = h('div', {});
  const actions = h('div', { class: 'actions', id: 'job-actions' });
  const logTitle = h('h2', {}, 'Logs');
  const logs = h('pre', { class: 'logs', id: 'logs' }, 'Choose a task to see its output.');
  let logAbort = null;

  function showLogs(task) {
    if (logAbort) logAbort.abort();
    logAbort = new AbortController();
    const signal = logAbort.signal;
    const live = ['TASK_STATE_RUNNING', 'TASK_STATE_SCHEDULED'].includes(task.state);
    replace(logTitle, 'Logs of ', h('span', { class: 'mono' }, task.id), live ? ' (following)' : '');
    replace(logs);
    const decoder = new TextDecoder();
    const path = `/v1/tasks/${encodeURIComponent(task.id)}/logs${live ? '?follow=true' : ''}`;
    stream(path, (chunk) => {
      logs.append(document.createTextNode(decoder.decode(decode(chunk.data), { stream: true })));
      logs.scrollTop = logs.scrollHeight;
    }, signal).then(() => {
      if (!logs.textContent) logs.textContent = '(no output)';
    }).catch((e) => {
      if (e.name !== 'AbortError') logs.append(document.createTextNode(`\n[${e.message}]`));
    });
  }

  const actionError = h('span', { class: 'field-error', id: 'job-action-error' });
  async function cancel() {
    actionError.textContent = '';
    try {
      await post(`/v1/jobs/${encodeURIComponent(jobId)}:cancel`, { reason: 'cancelled from the console' });
    } catch (e) {
      actionFailed(e, actionError);
    }
  }

  function draw(job) {
    const spec = job.spec || {};
    const why = jobReason(job);
    const finished = ['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED',
      'JOB_STATE_CANCELLING'].includes(job.state);
    // Re-run: the submit form filled from this job (reviewed, and secrets given again, there).
    const rerun = h('button', { type: 'button', id: 'job-rerun', onclick: () => {
      saveDraft(draftFrom(job));
      location.hash = '#/submit';
    } }, 'Re-run…');
    replace(actions, finished ? rerun : h('button', { type: 'button', id: 'job-cancel',
      class: 'danger', onclick: cancel }, 'Cancel job'), ' ', actionError);
    replace(content,
      h('dl', { class: 'kv', id: 'job' },
        h('dt', {}, 'state'), h('dd', {}, state(job.state)),
        why ? [h('dt', {}, 'why'), h('dd', { class: 'reason', id: 'job-reason' }, why)] : null,
        h('dt', {}, 'tenant'), h('dd', { id: 'job-tenant' }, spec.tenant || ''),
        h('dt', {}, 'pool'), h('dd', {}, spec.pool || ''),
        h('dt', {}, 'priority'), h('dd', {}, spec.priorityClass || 'default'),
        h('dt', {}, 'resources'), h('dd', {}, resources(spec)),
        h('dt', {}, 'command'), h('dd', { class: 'mono', id: 'job-command' },
          (spec.template?.command || []).join(' ')),
        h('dt', {}, 'submitted'), h('dd', {}, time(job.submitTime)),
        job.finishTime ? [h('dt', {}, 'finished'), h('dd', {}, time(job.finishTime))] : null),
      h('h2', {}, 'Tasks'),
      h('table', { id: 'tasks' },
        h('thead', {}, h('tr', {}, ['task', 'state', 'node', 'devices', 'attempt', 'exit',
          'reason', ''].map((c) => h('th', {}, c)))),
        h('tbody', {}, (job.tasks || []).map((t) => h('tr', { 'data-task': t.id },
          h('td', { class: 'mono' }, t.id),
          h('td', {}, state(t.state)),
          h('td', {}, t.node || ''),
          h('td', { class: 'mono' }, (t.allocations || []).map((a) =>
            h('div', { title: a.deviceId }, `${a.deviceId.slice(-12)} · ${tflops(a.milliTflops)} · ${vram(a.vramMib)}`))),
          h('td', { class: 'num' }, String(t.attempt ?? '')),
          h('td', { class: 'num' }, ['TASK_STATE_SUCCEEDED', 'TASK_STATE_FAILED'].includes(t.state)
            ? String(t.exitCode) : ''),
          h('td', { class: 'reason task-reason' },
            t.state === 'TASK_STATE_PULLING' && t.pull ? pullText(t) : (t.reason || ''),
            endpointsOf(t)),
          h('td', {}, h('button', { type: 'button', onclick: () => showLogs(t) }, 'logs')))))));
  }

  const live = h('span', { class: 'live', id: 'job-live', 'data-events': '0' }, 'connecting…');
  const events = h('ol', { class: 'events', id: 'job-events', reversed: true });
  const root = h('div', {}, h('h1', {}, 'Job ', h('span', { class: 'mono' }, jobId), ' ', live),
    actions, content, h('h2', {}, 'Events'), events, logTitle, logs);

  const watchAbort = new AbortController();
  let watching = false;
  let count = 0;
  function watch() {
    watching = true;
    replace(live, 'live');
    live.className = 'live on';
    stream(`/v1/jobs/${encodeURIComponent(jobId)}:watch`, (ev) => {
      count += 1;
      live.dataset.events = String(count);
      if (ev.job) draw(ev.job);
      if (ev.message) {
        events.prepend(h('li', {}, h('span', { class: 'muted' }, time(ev.time)), ' ', ev.message));
        while (events.children.length > 50) events.lastChild.remove();
      }
    }, watchAbort.signal).then(() => {
      watching = false;
      replace(live, 'watch ended · polling');
      live.className = 'live';
    }).catch((e) => {
      watching = false;
      if (e.name === 'AbortError') return;
      replace(live, `watch failed (${e.message}) · polling`);
      live.className = 'live';
    });
  }
  watch();

  async function refresh(signal) {
    if (watching && content.firstChild) return;  // the watch keeps the job current
    draw(await get(`/v1/jobs/${encodeURIComponent(jobId)}`, signal));
  }
  function dispose() {
    watchAbort.abort();
    if (logAbort) logAbort.abort();
  }
  return { root, refresh, dispose };
}
