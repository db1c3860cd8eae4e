// DOM helpers. Every piece of server data reaches the page as a text node or an attribute value:
// nothing here parses HTML, so a job name or command can never become markup.
export function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'style') for (const [p, x] of Object.entries(v)) e.style.setProperty(p, x);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function replace(e, ...children) {
  e.replaceChildren();
  append(e, children);
}

// "JOB_STATE_RUNNING" → a span reading RUNNING, coloured by state.
export function state(s) {
  const short = String(s || '').replace(/^[A-Z]+_STATE_/, '');
  return h('span', { class: `state s-${short}` }, short);
}

export function tflops(milli) { return (Number(milli || 0) / 1000).toFixed(1) + ' TFLOPS'; }
export function vram(mib) {
  const n = Number(mib || 0);
  return n >= 1024 ? (n / 1024).toFixed(n % 1024 ? 1 : 0) + ' GiB' : n + ' MiB';
}
export function time(ts) { return ts ? new Date(ts).toLocaleString() : ''; }
export function ago(ts) {
  if (!ts) return '';
  const s = Math.max(0, Math.round((Date.now() - new Date(ts).getTime()) / 1000));
  if (s < 90) return s + 's ago';
  if (s < 5400) return Math.round(s / 60) + 'm ago';
  return Math.round(s / 3600) + 'h ago';
}

// A stable colour per tenant, so one tenant's slices look alike across nodes.
export function colour(key) {
  let x = 0;
  for (const ch of String(key)) x = (x * 31 + ch.codePointAt(0)) >>> 0;
  return `hsl(${x % 360} 55% 45%)`;
}

export function pct(part, whole) {
  const w = Number(whole || 0);
  return w > 0 ? Math.min(100, (100 * Number(part || 0)) / w) : 0;
}
