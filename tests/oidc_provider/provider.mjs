// A real OpenID Connect provider on loopback for the tests of gpupool's single sign-on: panva's
// oidc-provider (an OpenID Certified implementation, pinned in package.json), configured with one
// public client, the console, that must use the authorization code flow with PKCE (S256). Nothing
// of the protocol is written here: discovery, JWKS, the authorization and token endpoints, PKCE
// checks and ID token signing are the library's. This file only supplies the accounts, the keys
// and the client.
//
//   node provider.mjs --redirect-uri URL [--port N] [--key KID=PEM_FILE ...]
//                     [--account LOGIN=TENANT:ROLE ...] [--id-token-ttl SECONDS]
//
// --key: RSA private keys (PEM); the first signs, the others are published in the JWKS too (a
// rotation: the tests restart the provider with a new first key and the old one after it).
// --account: a login the provider's development sign-in page accepts (any password), with the
// claims gpupoold reads: gpupool_tenant (absent for TENANT "-") and gpupool_role.
// Prints "issuer <url>" on stdout once it listens; stops on SIGTERM.
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import Provider from 'oidc-provider';

function parseArgs(argv) {
  const out = { port: 0, keys: [], accounts: {}, redirectUris: [], idTokenTtl: 600 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag}: needs a value`);
    if (flag === '--port') out.port = Number(value);
    else if (flag === '--redirect-uri') out.redirectUris.push(value);
    else if (flag === '--id-token-ttl') out.idTokenTtl = Number(value);
    else if (flag === '--key') {
      const [kid, file] = value.split('=');
      out.keys.push({ kid, file });
    } else if (flag === '--account') {
      const [login, rest] = value.split('=');
      const [tenant, role] = rest.split(':');
      out.accounts[login] = { tenant, role };
    } else throw new Error(`unknown flag ${flag}`);
  }
  if (out.redirectUris.length === 0) throw new Error('--redirect-uri: required');
  return out;
}

function signingKeys(keys) {
  if (keys.length === 0) {
    const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    return [{ ...privateKey.export({ format: 'jwk' }), kid: 'generated', alg: 'RS256', use: 'sig' }];
  }
  return keys.map(({ kid, file }) => {
    const key = crypto.createPrivateKey(fs.readFileSync(file));
    return { ...key.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  });
}

const args = parseArgs(process.argv.slice(2));
const server = http.createServer();
server.listen(args.port, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: 'gpupool-console',
      token_endpoint_auth_method: 'none',  // a public client: PKCE is its proof
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: args.redirectUris,
      post_logout_redirect_uris: args.redirectUris,  // Sign out comes back to the console
    }],
    pkce: { required: () => true },
    claims: { openid: ['sub'], gpupool: ['gpupool_tenant', 'gpupool_role'] },
    scopes: ['openid', 'gpupool'],
    // The scope's claims go into the ID token itself: the console sends that token to gpupoold.
    conformIdTokenClaims: false,
    clientBasedCORS: () => true,
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    jwks: { keys: signingKeys(args.keys) },
    ttl: { IdToken: args.idTokenTtl },
    features: { devInteractions: { enabled: true } },
    async findAccount(ctx, id) {
      const a = args.accounts[id];
      if (!a) return undefined;
      return {
        accountId: id,
        async claims() {
          const claims = { sub: id, gpupool_role: a.role };
          if (a.tenant !== '-') claims.gpupool_tenant = a.tenant;
          return claims;
        },
      };
    },
  });
  provider.proxy = false;
  server.on('request', provider.callback());
  process.stdout.write(`issuer ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
