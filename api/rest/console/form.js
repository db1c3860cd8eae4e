// Forms that send to the API: its refusal names the field at fault ("spec.pool: …",
// "key.role: …"); placeError shows it next to the input whose data-field is the longest prefix
// of that field (inputs in a hidden group are skipped), else in `fallback`.
import { ApiError } from './api.js';
import { h } from './dom.js';

// A labelled input with the slot its error goes in (and an optional hint under it).
export function fieldRow(label, control, hint) {
  return h('label', { class: 'row' }, h('span', { class: 'label' }, label), control,
    h('span', { class: 'field-error', 'data-for': control.id }),
    hint ? h('span', { class: 'muted hint' }, hint) : null);
}
export function clearErrors(form) {
  for (const e of form.querySelectorAll('.field-error')) e.textContent = '';
  for (const e of form.querySelectorAll('[aria-invalid]')) e.removeAttribute('aria-invalid');
}

export function placeError(form, message, fallback) {
  const field = message.includes(':') ? message.slice(0, message.indexOf(':')) : '';
  let best = null;
  for (const e of form.querySelectorAll('[data-field]')) {
    const f = e.dataset.field;
    const names = field === f || field.startsWith(f + '.') || field.startsWith(f + '[');
    if (field && names && !e.closest('[hidden]') &&
        (!best || f.length > best.dataset.field.length)) best = e;
  }
  const slot = best && form.querySelector(`.field-error[data-for="${best.id}"]`);
  if (!slot) { fallback.textContent = message; return; }
  best.setAttribute('aria-invalid', 'true');
  slot.textContent = message;
  best.focus();
}

// A form's call failed: a 401 is the shell's (back to sign-in; a kept draft stays), anything
// else is placed next to the field it names.
export function formFailed(form, err, fallback) {
  if (err instanceof ApiError && err.status === 401) return unauthorized(err.message);
  placeError(form, err instanceof ApiError ? err.detail || err.message : String(err), fallback);
}

// A button's call (cancel, revoke, cordon …) failed: a 401 is the shell's, anything else is
// written in `out` beside the button.
export function actionFailed(err, out) {
  if (err instanceof ApiError && err.status === 401) return unauthorized(err.message);
  out.textContent = err.message;
}

// A 401 from a view's own call: the shell sends the user back to sign in (app.js).
export function unauthorized(message) {
  window.dispatchEvent(new CustomEvent('gpupool:unauthorized', { detail: message }));
}
