// The console's shell: sign-in (single sign-on through the identity provider, sso.js, or a pasted
// token; either way a bearer token kept in sessionStorage), hash routing between the views, and
// live updates — the current view refreshes every few seconds while the tab is visible.
// A view is { root, refresh(signal), dispose? }; its refresh throws ApiError on failure, shown in
// the error line (a 401 sends the user back to sign in).
import { token, setToken, clearToken, ApiError } from './api.js';
import { h, replace } from './dom.js';
import { poolsView } from './pools.js';
import { jobsView } from './jobs.js';
import { jobView } from './job.js';
import { tenantsView } from './tenants.js';
import { servicesView } from './services.js';
import { submitView } from './submit.js';
import { keysView } from './keys.js';
import { usageView } from './usage.js';
import { auditView } from './audit.js';
import { pricePlansView } from './priceplans.js';
import { signInOptions, signOutUrl, startSignIn, finishSignIn } from './sso.js';

const REFRESH_MS = 3000;
const WHO = 'gpupool.who';  // what the header says of the user, beside the token
const VIA_SSO = 'gpupool.sso';  // set while the token is the provider's ID token
const $ = (id) => document.getElementById(id);
let current = null;
let inflight = null;

function navigate(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

function viewFor(hash) {
  const [path, query] = hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'submit') return ['submit', submitView(navigate)];
  if (parts[0] === 'keys') return ['keys', keysView()];
  if (parts[0] === 'usage') return ['usage', usageView()];
  if (parts[0] === 'audit') return ['audit', auditView(params, navigate)];
  if (parts[0] === 'priceplans') return ['priceplans', pricePlansView()];
  if (parts[0] === 'jobs' && parts[1]) return ['jobs', jobView(parts[1])];
  if (parts[0] === 'jobs') return ['jobs', jobsView(params, navigate)];
  if (parts[0] === 'tenants') return ['tenants', tenantsView()];
  if (parts[0] === 'services') return ['services', servicesView()];
  return ['pools', poolsView()];
}

function showError(message) {
  const e = $('error');
  e.textContent = message || '';
  e.hidden = !message;
}

async function refresh() {
  if (!current || inflight) return;
  const view = current;
  inflight = new AbortController();
  try {
    await view.refresh(inflight.signal);
    if (view === current) {
      showError('');
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
      document.body.dataset.loaded = 'true';
    }
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (e instanceof ApiError && e.status === 401) {
      clearToken();
      showLogin('The server refused the token: ' + e.message);
      return;
    }
    showError(e.message);
  } finally {
    inflight = null;
  }
}

function route() {
  if (token() === null) return showLogin('');
  if (inflight) inflight.abort();
  inflight = null;
  if (current?.dispose) current.dispose();
  const [section, view] = viewFor(location.hash || '#/pools');
  current = view;
  document.body.dataset.loaded = 'false';
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === '#/' + section);
  }
  replace($('view'), view.root);
  refresh();
}

function showLogin(message) {
  if (inflight) inflight.abort();
  inflight = null;
  if (current?.dispose) current.dispose();
  current = null;
  document.body.dataset.loaded = 'false';
  replace($('view'));
  $('login').hidden = false;
  $('logout').hidden = true;
  $('who').textContent = '';
  sessionStorage.removeItem(WHO);
  showError(message);
  $('token').focus();
  offerSingleSignOn();
}

// Shows the single sign-on button when gpupoold has a provider, or says why it cannot be used
// and asks again a little later while the sign-in form is up (the provider may be starting).
async function offerSingleSignOn() {
  const o = await signInOptions();
  $('sso').hidden = !o.oidc;
  $('sso-note').hidden = !o.error;
  $('sso-note').textContent = o.error ? 'Single sign-on is unavailable: ' + o.error : '';
  if (o.error) setTimeout(() => { if (!$('login').hidden) offerSingleSignOn(); }, 5000);
}

function signedIn() {
  $('login').hidden = true;
  $('logout').hidden = false;
  $('who').textContent =
      sessionStorage.getItem(WHO) || (token() ? 'signed in with a token' : 'no token');
  route();
}

document.addEventListener('DOMContentLoaded', async () => {
  $('login').addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.removeItem(VIA_SSO);
    setToken($('token').value.trim());
    $('token').value = '';
    signedIn();
  });
  $('sso').addEventListener('click', async () => {
    const o = await signInOptions();
    if (o.oidc) await startSignIn(o.oidc, location.hash);
    else showError('Single sign-on is unavailable: ' + (o.error || 'not configured'));
  });
  $('anon').addEventListener('click', () => {
    sessionStorage.removeItem(VIA_SSO);
    setToken('');
    signedIn();
  });
  // Signing out of a single sign-on also ends the provider's session, where it allows that, so
  // the next user of this browser must sign in there again.
  $('logout').addEventListener('click', async () => {
    const sso = sessionStorage.getItem(VIA_SSO) !== null;
    clearToken();
    sessionStorage.removeItem(VIA_SSO);
    const url = sso ? signOutUrl((await signInOptions()).oidc) : null;
    if (url) location.assign(url); else showLogin('');
  });
  window.addEventListener('hashchange', route);
  // A view's own call (a form's POST) refused the credential: back to sign-in, as refresh does.
  window.addEventListener('gpupool:unauthorized', (e) => {
    clearToken();
    showLogin('The server refused the token: ' + e.detail);
  });
  setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
  // Back from the identity provider: finish the sign-in, then the view the user left.
  let sso = null;
  try {
    sso = await finishSignIn();
  } catch (e) {
    clearToken();
    showLogin(e.message);
    return;
  }
  if (sso) {
    setToken(sso.token);
    sessionStorage.setItem(VIA_SSO, '1');
    sessionStorage.setItem(WHO, 'signed in as ' + sso.subject + ' (single sign-on)');
  }
  if (token() === null) showLogin(''); else signedIn();
});
