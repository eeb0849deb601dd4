import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { callIdentity, decodeJwt, setIdentitySettings } from "../support/identity-client.js";
import {
  createCredentialIn,
  createTimings,
  getAssertionIn,
  launchBrowser,
  openPasskeyPage,
  sdkIn,
  signedIn,
  type PasskeyPage,
  type TestBrowser,
} from "../support/passkey-browser.js";
import {
  beginAddPasskey,
  beginLogin,
  beginRegistration,
  countRows,
  createPasskeyOrganization,
  ensureSdkBuilt,
  finishAddPasskey,
  finishLogin,
  finishRegistration,
  newPasskeyIdentifier,
  refusal,
  removePasskey,
  startPasskeyServer,
  storedPasskey,
  validateSession,
  type PasskeyServer,
} from "../support/passkey-client.js";

// Passkeys end to end: the SDK served by the platform, in headless Chromium
// with a DevTools virtual authenticator (CTAP2, internal, resident keys, user
// verification), against a real server and database.

let s: PasskeyServer;
let browser: TestBrowser;
const pages: PasskeyPage[] = [];
const timings = createTimings("passkeys");

beforeAll(async () => {
  ensureSdkBuilt();
  s = await startPasskeyServer();
  browser = await timings.time("launch chromium", () => launchBrowser());
});

afterAll(async () => {
  await Promise.all(pages.map((p) => p.context.close()));
  await browser?.close();
  await s?.server.close();
  console.log(`passkey browser timings (${process.env.TEST_DATABASE_URL ? "PostgreSQL" : "SQLite"}):\n  ${timings.report().join("\n  ")}`);
});

/** A device: a fresh browser context on the example page, with its own authenticator. */
async function device(path = "/sdk/example"): Promise<PasskeyPage> {
  const opened = await timings.time("open page + authenticator", () => openPasskeyPage(browser, s.origin + path));
  pages.push(opened);
  return opened;
}

async function expectValidSession(token: string, identityId: string) {
  const validated = await validateSession(s, token);
  expect(validated.status).toBe(200);
  expect(validated.body.identityId).toBe(identityId);
  expect(decodeJwt(token).payload).toMatchObject({ sub: identityId, aud: s.organizationId });
}

describe("registration and sign-in with the SDK", () => {
  test("register(identifier) creates the identity with its passkey; login by identifier, without one, and by autofill sign it in", async () => {
    const { page } = await device();
    const identifier = newPasskeyIdentifier();

    const registered = signedIn(
      await timings.time("sdk register", () => sdkIn(page, s.publishableKey, { method: "register", identifier })),
    );
    await expectValidSession(registered.session.token, registered.identity_id);
    expect(Date.parse(registered.session.expires_at)).toBeGreaterThan(Date.now());
    const identity = await s.server.app.database.client.identity.findFirst({ where: { id: registered.identity_id } });
    expect(identity).toMatchObject({ organizationId: s.organizationId, identifier });

    const rows = await s.server.app.database.client.passkey.findMany({ where: { identityId: registered.identity_id } });
    expect(rows).toHaveLength(1);
    const [created] = rows;
    expect(created).toMatchObject({
      organizationId: s.organizationId,
      name: null,
      lastUsedAt: null,
      backedUp: false,
      deviceType: "singleDevice",
    });
    expect(JSON.parse(created!.transports)).toEqual(["internal"]);
    expect(created!.aaguid).toMatch(/^[0-9a-f-]{36}$/);
    expect(created!.publicKey.length).toBeGreaterThan(32);

    const byIdentifier = signedIn(
      await timings.time("sdk login (identifier)", () => sdkIn(page, s.publishableKey, { method: "login", argument: identifier })),
    );
    expect(byIdentifier.identity_id).toBe(registered.identity_id);
    await expectValidSession(byIdentifier.session.token, registered.identity_id);

    const usernameless = signedIn(await timings.time("sdk login (discoverable)", () => sdkIn(page, s.publishableKey, { method: "login" })));
    expect(usernameless.identity_id).toBe(registered.identity_id);
    await expectValidSession(usernameless.session.token, registered.identity_id);

    const autofill = signedIn(
      await timings.time("sdk login (conditional)", () =>
        sdkIn(page, s.publishableKey, { method: "login", argument: { mediation: "conditional" } }),
      ),
    );
    expect(autofill.identity_id).toBe(registered.identity_id);
    await expectValidSession(autofill.session.token, registered.identity_id);

    const tokens = new Set([registered, byIdentifier, usernameless, autofill].map((r) => decodeJwt(r.session.token).payload.sid));
    expect(tokens.size).toBe(4);
    const used = await storedPasskey(s, created!.id);
    expect(used!.lastUsedAt).not.toBeNull();
    expect(Number(used!.counter)).toBeGreaterThan(Number(created!.counter));
  });

  test("the example page registers and signs in with the SDK, and offers the passkey in autofill on load", async () => {
    const { page } = await device(`/sdk/example?publishable_key=${s.publishableKey}`);
    const identifier = newPasskeyIdentifier("example");
    const result = page.locator("#result");

    await page.fill("#identifier", identifier);
    await page.click("#register");
    await page.locator('#result[data-action="register"][data-state="done"]').waitFor();
    const registered = JSON.parse((await result.textContent())!.split("\n").slice(1).join("\n")) as {
      identity_id: string;
      session: { token: string };
    };
    await expectValidSession(registered.session.token, registered.identity_id);

    await page.click("#login");
    await page.locator('#result[data-action="login"][data-state="done"]').waitFor();
    const loggedIn = JSON.parse((await result.textContent())!.split("\n").slice(1).join("\n")) as {
      identity_id: string;
      session: { token: string };
    };
    expect(loggedIn.identity_id).toBe(registered.identity_id);
    await expectValidSession(loggedIn.session.token, registered.identity_id);

    // Loaded again, the page starts a conditional (autofill) sign-in; the virtual authenticator answers it at once.
    await page.reload();
    await page.locator('#result[data-action="autofill"][data-state="done"]').waitFor();
    const autofill = JSON.parse((await result.textContent())!.split("\n").slice(1).join("\n")) as {
      identity_id: string;
      session: { token: string };
    };
    expect(autofill.identity_id).toBe(registered.identity_id);
    await expectValidSession(autofill.session.token, registered.identity_id);
  });

  test("SDK errors are GatehouseErrors with stable codes: cancelled, not_allowed, network", async () => {
    const { page, authenticator } = await device();
    const identifier = newPasskeyIdentifier("errors");
    signedIn(await sdkIn(page, s.publishableKey, { method: "register", identifier }));
    const webauthn = { authenticatorId: authenticator.authenticatorId };

    // cancel() ends a pending ceremony: with presence simulation off, the authenticator waits for a touch that never comes.
    await authenticator.cdp.send("WebAuthn.setAutomaticPresenceSimulation", { ...webauthn, enabled: false });
    const cancelled = await page.evaluate(async (publishableKey) => {
      const url = "/sdk/gatehouse.js";
      const sdk = (await import(url)) as typeof import("../../src/sdk/index.js");
      const gatehouse = new sdk.Gatehouse({ publishableKey, domain: location.origin });
      // Cancel once the browser has the request (after the begin call), not before.
      const get = navigator.credentials.get.bind(navigator.credentials);
      const asked = new Promise<void>((resolve) => {
        navigator.credentials.get = (options) => {
          resolve();
          return get(options);
        };
      });
      const pending = gatehouse.login().then(
        () => ({ code: "resolved" }),
        (error: { code?: string }) => ({ code: error.code ?? String(error), isGatehouseError: error instanceof sdk.GatehouseError }),
      );
      await asked;
      gatehouse.cancel();
      navigator.credentials.get = get;
      return pending;
    }, s.publishableKey);
    expect(cancelled).toEqual({ code: "cancelled", isGatehouseError: true });
    await authenticator.cdp.send("WebAuthn.setAutomaticPresenceSimulation", { ...webauthn, enabled: true });

    // The user declines verification: the browser says NotAllowedError, the SDK not_allowed.
    await authenticator.cdp.send("WebAuthn.setUserVerified", { ...webauthn, isUserVerified: false });
    expect(await sdkIn(page, s.publishableKey, { method: "login", argument: identifier })).toMatchObject({
      ok: false,
      code: "not_allowed",
      isGatehouseError: true,
    });
    await authenticator.cdp.send("WebAuthn.setUserVerified", { ...webauthn, isUserVerified: true });

    // A platform that cannot be reached.
    const network = await page.evaluate(async (publishableKey) => {
      const url = "/sdk/gatehouse.js";
      const sdk = (await import(url)) as typeof import("../../src/sdk/index.js");
      const gatehouse = new sdk.Gatehouse({ publishableKey, domain: "http://localhost:1" });
      return gatehouse.login().then(
        () => ({ code: "resolved" }),
        (error: { code?: string }) => ({ code: error.code ?? String(error), isGatehouseError: error instanceof sdk.GatehouseError }),
      );
    }, s.publishableKey);
    expect(network).toEqual({ code: "network", isGatehouseError: true });

    // A secret key is refused before anything is sent.
    const secret = await page.evaluate(async (secretKey) => {
      const url = "/sdk/gatehouse.js";
      const sdk = (await import(url)) as typeof import("../../src/sdk/index.js");
      try {
        new sdk.Gatehouse({ publishableKey: secretKey, domain: location.origin });
        return { code: "constructed" };
      } catch (error) {
        return { code: (error as { code?: string }).code };
      }
    }, s.secretKey);
    expect(secret).toEqual({ code: "invalid_argument" });
  });

  test("the README's page of five lines registers and signs in from an app's own origin (cross-origin)", async () => {
    const whole = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "..", "README.md"), "utf8");
    const readme = whole.slice(whole.indexOf("### Passkeys"));
    const snippet = /```html\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    expect(snippet.trimEnd().split("\n").length).toBeLessThanOrEqual(5);

    // The app lives on its own origin (its own server); the organisation allows it for passkeys.
    const org = await createPasskeyOrganization(s);
    const fill = (html: string) => html.replaceAll("http://localhost:8080", s.origin).replaceAll("pk_...", org.publishableKey);
    let body = fill(snippet);
    const appServer = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(body);
    });
    await new Promise<void>((resolve) => appServer.listen(0, "127.0.0.1", resolve));
    const app = `http://localhost:${(appServer.address() as AddressInfo).port}`;
    try {
      await setIdentitySettings(s.server, { origins: [s.origin, app] }, org.organizationId);
      const { page } = await device();
      const run = async () => {
        await timings.time("README page (cross-origin)", async () => {
          await page.goto(`${app}/`);
          await page.waitForFunction(() => document.body?.textContent?.includes("identity_id"));
        });
        return JSON.parse((await page.textContent("body"))!) as { identity_id: string; session: { token: string } };
      };
      const registered = await run();
      expect((await validateSession(s, registered.session.token, org.secretKey)).body.identityId).toBe(registered.identity_id);
      body = fill(snippet.replace(/register\("[^"]*"\)/, "login()"));
      const loggedIn = await run();
      expect(loggedIn.identity_id).toBe(registered.identity_id);
      expect((await validateSession(s, loggedIn.session.token, org.secretKey)).body.identityId).toBe(registered.identity_id);
    } finally {
      appServer.close();
    }

    // The preflight the browser sent for those calls.
    const preflight = await s.server.call("/identity/register/begin", {
      method: "OPTIONS",
      headers: {
        origin: "https://app.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    expect((preflight.headers.get("access-control-allow-headers") ?? "").split(", ")).toEqual(
      expect.arrayContaining(["authorization", "content-type"]),
    );
  });

  test("the SDK module and the example page are served with their types and cache validators", async () => {
    const sdk = await s.server.call("/sdk/gatehouse.js");
    expect(sdk.status).toBe(200);
    expect(sdk.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(sdk.headers.get("access-control-allow-origin")).toBe("*");
    const source = await sdk.text();
    expect(source).toMatch(/export\s*\{[^}]*\bGatehouse\b/);
    const again = await s.server.call("/sdk/gatehouse.js", { headers: { "if-none-match": sdk.headers.get("etag")! } });
    expect(again.status).toBe(304);
    const example = await s.server.call("/sdk/example");
    expect(example.status).toBe(200);
    expect(example.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await example.text()).toContain('from "./gatehouse.js"');
  });
});

describe("passkeys managed by the backend", () => {
  test("BeginAddPasskey/FinishAddPasskey add a second passkey; RemovePasskey removes one, which then no longer signs in", async () => {
    const first = await device();
    const identifier = newPasskeyIdentifier("two-devices");
    const registered = signedIn(await sdkIn(first.page, s.publishableKey, { method: "register", identifier }));
    const [firstPasskey] = await s.server.app.database.client.passkey.findMany({ where: { identityId: registered.identity_id } });

    // The backend starts the ceremony with its secret key; the user's second device answers it.
    const second = await device();
    const begun = await beginAddPasskey(s, registered.identity_id);
    expect(begun.status).toBe(200);
    expect(begun.body.options).toMatchObject({
      rp: { id: "localhost" },
      user: { name: identifier },
      excludeCredentials: [{ id: firstPasskey!.id, type: "public-key" }],
      authenticatorSelection: { residentKey: "required", userVerification: "required" },
    });
    const credential = await timings.time("navigator.credentials.create (backend options)", () =>
      createCredentialIn(second.page, begun.body.options),
    );
    const added = await finishAddPasskey(s, begun.body.ceremonyId, credential, "second device");
    expect(added.status).toBe(200);
    expect(added.body.credentialId).toBe(credential.id);
    expect(await storedPasskey(s, added.body.credentialId)).toMatchObject({ identityId: registered.identity_id, name: "second device" });

    // Sign-in by identifier now offers both passkeys; each device signs in.
    const offered = await beginLogin(s, identifier);
    expect((offered.body.options.allowCredentials as { id: string }[]).map((c) => c.id).sort()).toEqual(
      [firstPasskey!.id, added.body.credentialId].sort(),
    );
    const fromSecond = signedIn(await sdkIn(second.page, s.publishableKey, { method: "login", argument: identifier }));
    expect(fromSecond.identity_id).toBe(registered.identity_id);
    await expectValidSession(fromSecond.session.token, registered.identity_id);

    expect((await removePasskey(s, registered.identity_id, firstPasskey!.id)).status).toBe(200);
    expect(await storedPasskey(s, firstPasskey!.id)).toBeNull();
    const afterRemoval = await beginLogin(s, identifier);
    expect((afterRemoval.body.options.allowCredentials as { id: string }[]).map((c) => c.id)).toEqual([added.body.credentialId]);

    // The first device still holds the removed passkey: a discoverable sign-in with it is refused (401) and opens no session.
    const before = await countRows(s);
    const refused = await sdkIn(first.page, s.publishableKey, { method: "login" });
    expect(refused).toMatchObject({ ok: false, code: "unauthenticated", reason: "passkey_not_found", isGatehouseError: true });
    const raw = await beginLogin(s);
    const assertion = await getAssertionIn(first.page, raw.body.options);
    expect(assertion.id).toBe(firstPasskey!.id);
    expect(refusal(await finishLogin(s, raw.body.ceremony_id, assertion))).toEqual({
      status: 401,
      code: "unauthenticated",
      reason: "passkey_not_found",
    });
    expect(await countRows(s)).toEqual(before);

    // The remaining passkey still signs in; removing the removed one again is not_found.
    const stillWorks = signedIn(await sdkIn(second.page, s.publishableKey, { method: "login" }));
    expect(stillWorks.identity_id).toBe(registered.identity_id);
    expect(refusal(await removePasskey(s, registered.identity_id, firstPasskey!.id))).toEqual({
      status: 404,
      code: "not_found",
      reason: "passkey_not_found",
    });
  });

  test("an identity holds at most 20 passkeys: BeginAddPasskey and FinishAddPasskey refuse the 21st", async () => {
    const { page } = await device();
    const registered = signedIn(await sdkIn(page, s.publishableKey, { method: "register", identifier: newPasskeyIdentifier("many") }));
    const db = s.server.app.database.client;
    const fixture = (i: number) => ({
      id: `fixture-${registered.identity_id.slice(0, 8)}-${i}`,
      organizationId: s.organizationId,
      identityId: registered.identity_id,
      publicKey: new Uint8Array(77),
      counter: 0n,
      transports: "[]",
      deviceType: "singleDevice",
      backedUp: false,
      aaguid: "00000000-0000-0000-0000-000000000000",
    });
    // 18 more stored passkeys make 19: one more may still be added.
    for (let i = 0; i < 18; i++) await db.passkey.create({ data: fixture(i) });
    const begun = await beginAddPasskey(s, registered.identity_id);
    expect(begun.status).toBe(200);
    const other = await device();
    const credential = await createCredentialIn(other.page, begun.body.options);
    // Meanwhile a 20th arrives: the finish re-checks under a lock of the identity and stores nothing.
    await db.passkey.create({ data: fixture(18) });
    const before = await countRows(s);
    expect(refusal(await finishAddPasskey(s, begun.body.ceremonyId, credential))).toEqual({
      status: 400,
      code: "failed_precondition",
      reason: "passkey_limit_reached",
    });
    expect(await countRows(s)).toEqual(before);
    expect(refusal(await beginAddPasskey(s, registered.identity_id))).toEqual({
      status: 400,
      code: "failed_precondition",
      reason: "passkey_limit_reached",
    });
  });

  test("BeginAddPasskey for an unknown identity is not_found; RemovePasskey checks its input", async () => {
    expect(refusal(await beginAddPasskey(s, "00000000-0000-4000-8000-000000000000"))).toEqual({
      status: 404,
      code: "not_found",
      reason: "identity_not_found",
    });
    const bad = await removePasskey(s, "nope", "not base64url!");
    expect(bad.status).toBe(400);
    const fields = (
      (bad.body as { details?: { debug?: { violations?: { field: string }[] } }[] }).details?.[0]?.debug?.violations ?? []
    ).map((v) => v.field);
    expect(fields.sort()).toEqual(["credential_id", "identity_id"]);
  });

  test("the backend RPCs take the secret key only; the client-side ones the publishable key only", async () => {
    expect((await beginAddPasskey(s, "00000000-0000-4000-8000-000000000000", s.publishableKey)).status).toBe(403);
    expect((await beginRegistration(s, newPasskeyIdentifier(), s.secretKey)).status).toBe(403);
    expect((await beginLogin(s, undefined, s.secretKey)).status).toBe(403);
  });
});

describe("what registration and sign-in refuse", () => {
  test("register/begin for an identifier that exists is refused with 409, through the SDK too", async () => {
    const identifier = newPasskeyIdentifier("taken");
    // An identity made another way (a magic link) takes the identifier.
    expect((await callIdentity(s.server, "GenerateMagicLink", { identifier }, s.secretKey)).status).toBe(200);
    expect(refusal(await beginRegistration(s, `  ${identifier.toUpperCase()} `))).toEqual({
      status: 409,
      code: "already_exists",
      reason: "identity_exists",
    });
    const { page } = await device();
    expect(await sdkIn(page, s.publishableKey, { method: "register", identifier })).toMatchObject({
      ok: false,
      code: "already_exists",
      reason: "identity_exists",
      isGatehouseError: true,
    });
  });

  test("login/begin for an unknown identifier answers like for a known one; its finish is refused", async () => {
    const { page } = await device();
    const known = newPasskeyIdentifier("known");
    signedIn(await sdkIn(page, s.publishableKey, { method: "register", identifier: known }));
    const unknown = newPasskeyIdentifier("unknown");
    const forKnown = await beginLogin(s, known);
    const forUnknown = await beginLogin(s, unknown);
    const again = await beginLogin(s, unknown);
    expect(forUnknown.status).toBe(forKnown.status);
    const shape = (options: Record<string, unknown>) => ({
      keys: Object.keys(options).sort(),
      credentials: (options.allowCredentials as Record<string, unknown>[]).map((c) => ({
        keys: Object.keys(c).sort(),
        idLength: String(c.id).length,
      })),
    });
    expect(shape(forUnknown.body.options)).toEqual(shape(forKnown.body.options));
    expect(Object.keys(forUnknown.body).sort()).toEqual(Object.keys(forKnown.body).sort());
    // Asking twice gives the same list, as for a real identity.
    expect(again.body.options.allowCredentials).toEqual(forUnknown.body.options.allowCredentials);
    expect(again.body.options.challenge).not.toBe(forUnknown.body.options.challenge);

    // The user's real passkey answers the unknown identifier's ceremony: refused, nothing created.
    const before = await countRows(s);
    const assertion = await getAssertionIn(page, { ...forUnknown.body.options, allowCredentials: forKnown.body.options.allowCredentials });
    expect(refusal(await finishLogin(s, forUnknown.body.ceremony_id, assertion))).toEqual({
      status: 401,
      code: "unauthenticated",
      reason: "passkey_not_allowed",
    });
    expect(await countRows(s)).toEqual(before);
  });

  test("a passkey of one organisation never signs in to another", async () => {
    const { page } = await device();
    signedIn(await sdkIn(page, s.publishableKey, { method: "register", identifier: newPasskeyIdentifier("org-a") }));
    const other = await createPasskeyOrganization(s);
    const before = await countRows(s, other.organizationId);
    const refused = await sdkIn(page, other.publishableKey, { method: "login" });
    expect(refused).toMatchObject({ ok: false, code: "unauthenticated", reason: "passkey_not_found" });
    expect(await countRows(s, other.organizationId)).toEqual(before);
  });

  test("with passkeys disabled every passkey call is refused with 403 and nothing is stored", async () => {
    const { page } = await device();
    const registered = signedIn(await sdkIn(page, s.publishableKey, { method: "register", identifier: newPasskeyIdentifier("disabled") }));
    const begunLogin = await beginLogin(s);
    const assertion = await getAssertionIn(page, begunLogin.body.options);
    await setIdentitySettings(s.server, { passkeys: false });
    try {
      const before = await countRows(s);
      const denied = { status: 403, code: "permission_denied", reason: "passkeys_disabled" };
      expect(await sdkIn(page, s.publishableKey, { method: "register", identifier: newPasskeyIdentifier() })).toMatchObject({
        ok: false,
        code: "permission_denied",
        reason: "passkeys_disabled",
      });
      expect(refusal(await beginRegistration(s, newPasskeyIdentifier()))).toEqual(denied);
      expect(refusal(await beginLogin(s))).toEqual(denied);
      expect(refusal(await finishLogin(s, begunLogin.body.ceremony_id, assertion))).toEqual(denied);
      expect(refusal(await beginAddPasskey(s, registered.identity_id))).toEqual(denied);
      expect(await countRows(s)).toEqual(before);
    } finally {
      await setIdentitySettings(s.server, { passkeys: true });
    }
    // The ceremony was not spent by the refusal: it still answers once passkeys are back on.
    expect((await finishLogin(s, begunLogin.body.ceremony_id, assertion)).status).toBe(200);
  });

  test("malformed requests are invalid_argument listing every field, and change nothing", async () => {
    const before = await countRows(s);
    const begin = await beginRegistration(s, "   ");
    expect(refusal(begin)).toMatchObject({ status: 400, code: "invalid_argument" });
    const finish = await finishRegistration(s, "not-a-ceremony", { id: "x", type: "password", response: { clientDataJSON: 7 } });
    expect(finish.status).toBe(400);
    const fields = (
      (finish.body as { details?: { debug?: { violations?: { field: string }[] } }[] }).details?.[0]?.debug?.violations ?? []
    ).map((v) => v.field);
    expect(fields.sort()).toEqual(
      [
        "ceremony_id",
        "credential.rawId",
        "credential.type",
        "credential.response.clientDataJSON",
        "credential.response.attestationObject",
      ].sort(),
    );
    expect(await countRows(s)).toEqual(before);
  });
});
