// Usage and invoices: what the credential's subtree used per day of a month, by project (the
// tenant tree cut at a depth), as a chart and a table (GET /v1/usage), and the month's invoices
// with their lines and totals (GET /v1/invoices), each downloadable as the server's CSV
// (GET /v1/invoices.csv) — the same figures `gpupoolctl usage` and `gpupoolctl invoices` show.
// Invoices need the tenant-admin role; without it the section shows the API's answer.
import { get, file, q, ApiError } from './api.js';
import { h, replace, colour } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) if (c) e.append(c);
  return e;
}

function thisMonth() { return new Date().toISOString().slice(0, 7); }
function monthRange(month) {
  const [y, m] = month.split('-').map(Number);
  const from = new Date(Date.UTC(y, m - 1, 1));
  const to = new Date(Date.UTC(y, m, 1));
  return [from, to];
}
const hours = (seconds) => Number(seconds || 0) / 3600;
// Two decimals, or two significant digits for what is smaller (a few seconds of a slice).
const fixed = (x) => {
  const n = Number(x);
  return n > 0 && n < 0.01 ? n.toPrecision(2) : n.toFixed(2);
};

// Stacked bars: TFLOPS-hours per day, one colour per project.
function chart(days, projects, byDayProject) {
  const width = 900, height = 220, left = 50, bottom = 20;
  const max = Math.max(1e-9, ...days.map((d) =>
    projects.reduce((s, p) => s + (byDayProject.get(d + '|' + p) || 0), 0)));
  const bw = (width - left) / Math.max(1, days.length);
  const g = svg('svg', { id: 'usage-chart', width, height, viewBox: `0 0 ${width} ${height}`,
    role: 'img', 'aria-label': 'TFLOPS-hours per day by project' });
  g.append(svg('text', { x: 0, y: 12, class: 'axis' }, document.createTextNode(fixed(max))));
  g.append(svg('text', { x: 0, y: height - bottom, class: 'axis' }, document.createTextNode('0')));
  days.forEach((d, i) => {
    let y = height - bottom;
    for (const p of projects) {
      const v = byDayProject.get(d + '|' + p) || 0;
      if (v <= 0) continue;
      const bh = ((height - bottom - 16) * v) / max;
      y -= bh;
      const bar = svg('rect', { x: left + i * bw + 1, y, width: Math.max(1, bw - 2), height: bh,
        fill: colour(p), 'data-day': d, 'data-project': p });
      bar.append(svg('title', {}, document.createTextNode(`${d} ${p}: ${fixed(v)} TFLOPS-h`)));
      g.append(bar);
    }
    if (i % 5 === 0) {
      g.append(svg('text', { x: left + i * bw, y: height - 4, class: 'axis' },
        document.createTextNode(d.slice(5))));
    }
  });
  return g;
}

export function usageView() {
  const f = { month: thisMonth(), depth: '2' };
  const usage = h('div', {});
  const invoices = h('div', { id: 'invoices' });
  const downloads = h('div', { id: 'downloads' });  // the last download's link; kept by refreshes
  const month = h('input', { id: 'u-month', type: 'month', value: f.month,
    onchange: (e) => { f.month = e.target.value || thisMonth(); load(); } });
  const depth = h('select', { id: 'u-depth', onchange: (e) => { f.depth = e.target.value; load(); } },
    [['1', 'organisations'], ['2', 'projects'], ['0', 'full paths']].map(([v, t]) =>
      h('option', { value: v, selected: v === f.depth }, t)));
  const root = h('div', {}, h('h1', {}, 'Usage and invoices'),
    h('div', { class: 'filters' }, h('label', {}, 'month', month), h('label', {}, 'by', depth)),
    h('h2', {}, 'Usage per day'), usage, h('h2', {}, 'Invoices'), invoices, downloads);

  async function drawUsage(signal) {
    const [from, to] = monthRange(f.month);
    const resp = await get('/v1/usage' + q({ period: 'day', from: from.toISOString(),
      to: to.toISOString(), tenantDepth: f.depth }), signal);
    const rows = resp.rows || [];
    const days = [];
    for (let d = new Date(from); d < to; d = new Date(d.getTime() + 86400e3)) {
      days.push(d.toISOString().slice(0, 10));
    }
    const byDayProject = new Map();
    const perProject = new Map();
    for (const r of rows) {
      const day = String(r.periodStart || '').slice(0, 10);
      const t = r.totals || {};
      const key = day + '|' + r.tenant;
      byDayProject.set(key, (byDayProject.get(key) || 0) + hours(t.tflopsSeconds));
      const p = perProject.get(r.tenant) || { tflops: 0, vram: 0, devices: 0, mig: 0 };
      p.tflops += hours(t.tflopsSeconds);
      p.vram += hours(t.vramGibSeconds);
      p.devices += hours(t.deviceSeconds);
      p.mig += hours(t.migInstanceSeconds);
      perProject.set(r.tenant, p);
    }
    const projects = [...perProject.keys()].sort();
    replace(usage, rows.length === 0 ? h('p', { class: 'muted', id: 'no-usage' }, 'No usage this month.') : [
      chart(days, projects, byDayProject),
      h('table', { id: 'usage' },
        h('thead', {}, h('tr', {}, ['project', 'TFLOPS-h', 'VRAM GiB-h', 'device-h', 'MIG instance-h']
          .map((c) => h('th', {}, c)))),
        h('tbody', {}, projects.map((p) => {
          const x = perProject.get(p);
          return h('tr', { 'data-project': p },
            h('td', {}, h('span', { class: 'swatch', style: { background: colour(p) } }), ' ', p),
            h('td', { class: 'num' }, fixed(x.tflops)), h('td', { class: 'num' }, fixed(x.vram)),
            h('td', { class: 'num' }, fixed(x.devices)), h('td', { class: 'num' }, fixed(x.mig)));
        })))]);
  }

  async function download(button) {
    button.disabled = true;
    try {
      const csv = await file('/v1/invoices.csv' + q({ period: f.month }));
      const old = downloads.querySelector('a');
      if (old) URL.revokeObjectURL(old.href);
      const a = h('a', { href: URL.createObjectURL(new Blob([csv.text], { type: 'text/csv' })),
        download: csv.name, id: 'invoice-csv' }, csv.name);
      replace(downloads, 'Downloaded ', a);
      a.click();
    } catch (e) {
      replace(downloads, h('p', { class: 'field-error' }, e.message));
    } finally {
      button.disabled = false;
    }
  }

  async function drawInvoices(signal) {
    let resp;
    try {
      resp = await get('/v1/invoices' + q({ period: f.month }), signal);
    } catch (e) {
      // A member cannot read invoices: say so here rather than failing the page.
      if (e instanceof ApiError && e.status === 403) {
        replace(invoices, h('p', { class: 'muted', id: 'invoices-denied' }, e.message));
        return;
      }
      throw e;
    }
    const list = resp.invoices || [];
    const button = h('button', { type: 'button', id: 'invoice-download',
      onclick: (ev) => download(ev.target) }, 'Download CSV');
    replace(invoices, list.length === 0 ? h('p', { class: 'muted', id: 'no-invoices' }, 'No invoice.') :
      list.map((inv) => h('section', { class: 'invoice', 'data-tenant': inv.tenant },
        h('h3', {}, `${inv.tenant} · ${String(inv.periodStart).slice(0, 10)} to ${String(inv.periodEnd).slice(0, 10)}`),
        h('table', { class: 'lines' },
          h('thead', {}, h('tr', {}, ['tenant', 'pool', 'model', 'unit', 'quantity', 'unit price', 'amount']
            .map((c) => h('th', {}, c)))),
          h('tbody', {}, (inv.lines || []).map((l) => h('tr', {},
            h('td', {}, l.tenant), h('td', {}, l.pool), h('td', {}, l.model + (l.migProfile ? ' ' + l.migProfile : '')),
            h('td', {}, l.unit), h('td', { class: 'num' }, l.quantity), h('td', { class: 'num' }, l.unitPrice),
            h('td', { class: 'num' }, l.amount))))),
        h('p', { class: 'totals' }, `subtotal ${inv.subtotal} · credits ${inv.creditTotal} · total `,
          h('strong', { class: 'invoice-total' }, `${inv.total} ${inv.currency}`)))),
    button);
  }

  // Rating a month is work for the server: the page reads again when the month or depth
  // changes, and otherwise at most every 30 s (not at every 3-s refresh of the shell).
  let loading = null;
  let loadedAt = 0;
  function load() {
    if (loading) loading.abort();
    loading = new AbortController();
    loadedAt = Date.now();
    Promise.all([drawUsage(loading.signal), drawInvoices(loading.signal)]).catch((e) => {
      if (e.name !== 'AbortError') replace(usage, h('p', { class: 'field-error' }, e.message));
    });
  }
  async function refresh(signal) {
    if (loadedAt && Date.now() - loadedAt < 30e3) return;
    await Promise.all([drawUsage(signal), drawInvoices(signal)]);
    loadedAt = Date.now();
  }
  return { root, refresh };
}
