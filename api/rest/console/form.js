// Forms that send to the API: its refusal names the field at fault ("spec.pool: …",
// "key.role: …"); placeError shows it next to the input whose data-field is the longest prefix
// of that field (inputs in a hidden group are skipped), else in `fallback`.
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

// A 401 from a view's own call: the shell sends the user back to sign in (app.js).
export function unauthorized(message) {
  window.dispatchEvent(new CustomEvent('gpupool:unauthorized', { detail: message }));
}
