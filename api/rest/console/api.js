// The REST client of the console: relative URLs (so it works over http or https, wherever
// gpupoold serves it), the user's bearer token from this tab's sessionStorage, errors as ApiError
// carrying the server's message. The token never goes into a URL.
const KEY = 'gpupool.token';

export function token() { return sessionStorage.getItem(KEY); }  // null: not signed in
export function setToken(t) { sessionStorage.setItem(KEY, t); }
export function clearToken() { sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra) {
  const out = { Accept: 'application/json', ...extra };
  const t = token();
  if (t) out.Authorization = 'Bearer ' + t;
  return out;
}

function request(path, signal) {
  return fetch(path, { headers: headers(), signal, cache: 'no-store', credentials: 'omit' });
}

async function failure(r) {
  const text = await r.text();
  let message = text || r.statusText;
  try { message = JSON.parse(text).message || message; } catch { /* not JSON */ }
  const e = new ApiError(r.status, `${r.status}: ${message}`);
  e.detail = message;  // without the status: "spec.pool: …"
  return e;
}

// POST with a JSON body; resolves to the JSON answer, rejects with ApiError (the server's
// message names the field at fault: "spec.pool: …").
async function send(method, path, body, signal) {
  const r = await fetch(path, { method, headers: headers({ 'Content-Type': 'application/json' }),
    body: JSON.stringify(body), signal, cache: 'no-store', credentials: 'omit' });
  if (!r.ok) throw await failure(r);
  return r.json();
}
export function post(path, body, signal) { return send('POST', path, body, signal); }
export function put(path, body, signal) { return send('PUT', path, body, signal); }
export function patch(path, body, signal) { return send('PATCH', path, body, signal); }
export function del(path, signal) { return send('DELETE', path, undefined, signal); }

export async function get(path, signal) {
  const r = await request(path, signal);
  if (!r.ok) throw await failure(r);
  return r.json();
}

// A file the server renders (CSV exports) as text, with the name it suggests.
export async function file(path, signal) {
  const r = await request(path, signal);
  if (!r.ok) throw await failure(r);
  const disposition = r.headers.get('Content-Disposition') || '';
  const m = /filename="([^"]+)"/.exec(disposition);
  return { text: await r.text(), name: m ? m[1] : 'export.csv', type: r.headers.get('Content-Type') };
}

// Reads a newline-delimited JSON stream, calling onItem with each line's `result`. Resolves when
// the stream ends; rejects with the error line or response.
export async function stream(path, onItem, signal) {
  const r = await request(path, signal);
  if (!r.ok) throw await failure(r);
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      if (msg.error) throw new ApiError(200, msg.error.message || 'stream failed');
      onItem(msg.result);
    }
  }
}

export function q(params) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') s.set(k, v);
  const text = s.toString();
  return text ? '?' + text : '';
}
