// Single sign-on: the OAuth 2.0 authorization code flow with PKCE (RFC 7636, S256) against the
// identity provider gpupoold trusts (docs/console.md, "Single sign-on"). The console is a public
// client: it holds no secret, so the one-time code verifier, kept in this tab's sessionStorage
// until the provider sends the user back, is what proves the code is ours. The ID token it gets
// is the bearer token gpupoold checks (signature against the provider's published keys, issuer,
// audience = this client, expiry); the page only checks the nonce, that the token answers the
// sign-in this tab started.
const PENDING = 'gpupool.sso.pending';

function base64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(bytes) {
  const b = new Uint8Array(bytes);
  crypto.getRandomValues(b);
  return base64url(b);
}

async function challengeOf(verifier) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

// The claims of a JWT, read for display and the nonce check; gpupoold verifies the signature.
export function claimsOf(jwt) {
  try {
    const part = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const text = new TextDecoder().decode(Uint8Array.from(atob(part), (c) => c.charCodeAt(0)));
    return JSON.parse(text);
  } catch {
    return {};
  }
}

function redirectUri() { return location.origin + '/console/'; }

// What gpupoold says of single sign-on: { oidc } (null when there is none) or { error } when it
// is configured but the provider has not answered yet.
export async function signInOptions() {
  try {
    const r = await fetch('/console/sign-in.json', { cache: 'no-store', credentials: 'omit' });
    const body = await r.json();
    return r.ok ? { oidc: body.oidc } : { error: body.error || r.statusText };
  } catch (e) {
    return { error: e.message };
  }
}

// Where *Sign out* sends a user who signed in through the provider, to end the provider's session
// too (OpenID Connect RP-Initiated Logout 1.0, by client_id: no token in the URL); null when the
// provider publishes no end_session_endpoint.
export function signOutUrl(oidc) {
  if (!oidc?.endSessionEndpoint) return null;
  const u = new URL(oidc.endSessionEndpoint);
  u.searchParams.set('client_id', oidc.clientId);
  u.searchParams.set('post_logout_redirect_uri', redirectUri());
  return u.toString();
}

// Sends the browser to the provider; `hash` is where to come back to (the view being used).
export async function startSignIn(oidc, hash) {
  const verifier = random(32);  // 43 characters, RFC 7636 §4.1
  const pending = {
    state: random(16), nonce: random(16), verifier, hash,
    issuer: oidc.issuer, clientId: oidc.clientId, tokenEndpoint: oidc.tokenEndpoint,
  };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const u = new URL(oidc.authorizationEndpoint);
  u.searchParams.set('response_type', 'code');
  u.searchParams.set('client_id', oidc.clientId);
  u.searchParams.set('redirect_uri', redirectUri());
  u.searchParams.set('scope', oidc.scopes);
  u.searchParams.set('state', pending.state);
  u.searchParams.set('nonce', pending.nonce);
  u.searchParams.set('code_challenge', await challengeOf(verifier));
  u.searchParams.set('code_challenge_method', 'S256');
  location.assign(u.toString());
}

// When the page was opened by the provider's redirect (?code=…&state=… or ?error=…), finishes the
// sign-in: resolves to { token, subject }, or rejects with an Error saying what went wrong. Null
// when the page is not such a redirect. Either way the code leaves the address bar at once.
export async function finishSignIn() {
  const params = new URLSearchParams(location.search);
  if (!params.has('code') && !params.has('error')) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || 'null');
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, '', '/console/' + (pending?.hash || ''));
  if (!pending || params.get('state') !== pending.state) {
    throw new Error('Single sign-on failed: the answer is not for a sign-in this tab started.');
  }
  if (params.has('error')) {
    throw new Error('The identity provider refused: ' +
                    (params.get('error_description') || params.get('error')));
  }
  // RFC 9207: a provider that names itself must be the one we went to.
  if (params.has('iss') && params.get('iss') !== pending.issuer) {
    throw new Error('Single sign-on failed: the answer came from another issuer.');
  }
  const body = new URLSearchParams({
    grant_type: 'authorization_code', code: params.get('code'), redirect_uri: redirectUri(),
    client_id: pending.clientId, code_verifier: pending.verifier,
  });
  const r = await fetch(pending.tokenEndpoint, {
    method: 'POST', body, cache: 'no-store', credentials: 'omit',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
  });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok || !answer.id_token) {
    throw new Error('The identity provider issued no token: ' +
                    (answer.error_description || answer.error || r.status));
  }
  const claims = claimsOf(answer.id_token);
  if (claims.nonce !== pending.nonce) {
    throw new Error('Single sign-on failed: the ID token is not for this sign-in.');
  }
  return { token: answer.id_token, subject: String(claims.sub || '') };
}
