// bench/session-tokens: what verifying a session token's signature costs with the
// platform's code (the one-encoding checks, then jose: ES256 over WebCrypto, typ,
// iss, aud, exp/nbf/iat) against bare node:crypto verify of the same tokens (the
// signature and a JSON.parse of the claims), in the same run. No server, no
// database: the session row lookup that follows is the same either way.
//
//   npm run build && node bench/session-tokens.mjs [--tokens 2000] [--rounds 5] [--in-flight 32]
//
// Printed per verification, medians over interleaved rounds:
// - one at a time: latency of one verification awaited before the next;
// - in flight: wall time per verification with N pending at once (WebCrypto runs
//   ECDSA on libuv's thread pool, so verifications overlap with the event loop);
// - event loop: time the event loop was busy per verification (what other requests wait for).
import { createPublicKey, verify } from "node:crypto";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { median, option } from "./support.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const count = option("tokens", 2000);
const rounds = option("rounds", 5);
const inFlight = option("in-flight", 32);

const module = join(root, "dist/src/domain/identity/session-token.js");
if (!existsSync(module)) {
  console.error("build first: npm run build");
  process.exit(1);
}
const tokens = await import(pathToFileURL(module).href);

const issuer = "http://127.0.0.1:8080";
const audience = "5b0c6f7e-0000-4000-8000-000000000000";
const key = await tokens.generateSigningKey();
const signingKey = { kid: key.kid, privateKey: await tokens.importSigningKey(key.privateKeyDer) };
const verificationKey = await tokens.importVerificationKey(key.publicJwk);
const nodeKey = createPublicKey({ key: key.publicJwk, format: "jwk" });
const iat = Math.floor(Date.now() / 1000);
const signed = [];
for (let i = 0; i < count; i++) {
  signed.push(
    await tokens.signSessionToken(
      { iss: issuer, aud: audience, sub: crypto.randomUUID(), sid: crypto.randomUUID(), iat, exp: iat + 3600 },
      signingKey,
    ),
  );
}
const now = new Date();

/** The platform's check of a token's signature and claims (sessions.ts without the key and row lookups). */
async function platform(token) {
  const form = tokens.readSessionTokenForm(token);
  if (!form) throw new Error("malformed");
  const verdict = await tokens.verifySessionTokenSignature(token, verificationKey, { issuer, audience, now });
  if (!verdict.ok || tokens.isHighS(form.signature)) throw new Error(`refused: ${verdict.message}`);
}

/** Bare node:crypto: the signature over the signing input, and the claims parsed. */
async function bare(token) {
  const dot = token.lastIndexOf(".");
  const ok = verify(
    "sha256",
    Buffer.from(token.slice(0, dot)),
    { key: nodeKey, dsaEncoding: "ieee-p1363" },
    Buffer.from(token.slice(dot + 1), "base64url"),
  );
  if (!ok) throw new Error("refused");
  JSON.parse(Buffer.from(token.slice(token.indexOf(".") + 1, dot), "base64url").toString("utf8"));
}

async function oneAtATime(fn) {
  const start = performance.now();
  for (const token of signed) await fn(token);
  return ((performance.now() - start) * 1000) / signed.length;
}

async function concurrent(fn) {
  const loop = performance.eventLoopUtilization();
  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < signed.length) await fn(signed[next++]);
    }),
  );
  const wall = ((performance.now() - start) * 1000) / signed.length;
  const busy = performance.eventLoopUtilization(loop);
  return { wall, loop: (busy.active * 1000) / signed.length };
}

const results = { platform: { serial: [], wall: [], loop: [] }, bare: { serial: [], wall: [], loop: [] } };
await oneAtATime(platform); // warm-up
await oneAtATime(bare);
for (let round = 0; round < rounds; round++) {
  for (const [name, fn] of [
    ["platform", platform],
    ["bare", bare],
  ]) {
    results[name].serial.push(await oneAtATime(fn));
    const { wall, loop } = await concurrent(fn);
    results[name].wall.push(wall);
    results[name].loop.push(loop);
  }
}

const row = (label, pick) => {
  const p = median(results.platform[pick]);
  const b = median(results.bare[pick]);
  return `${label.padEnd(28)}${p.toFixed(1).padStart(10)} µs${b.toFixed(1).padStart(12)} µs${(p / b).toFixed(2).padStart(10)}x`;
};
console.log(`session token verification, ${count} tokens x ${rounds} rounds (medians), node ${process.version}`);
console.log(`${"".padEnd(28)}${"platform".padStart(13)}${"bare crypto".padStart(15)}${"ratio".padStart(11)}`);
console.log(row("one at a time (latency)", "serial"));
console.log(row(`${inFlight} in flight (wall)`, "wall"));
console.log(row(`${inFlight} in flight (event loop)`, "loop"));
