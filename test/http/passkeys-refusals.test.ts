import { setIdentitySettings } from "../support/identity-client.js";
import {
  createCredentialIn,
  createTimings,
  getAssertionIn,
  launchBrowser,
  openForeignOrigin,
  openPasskeyPage,
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
  startPasskeyServer,
  type OptionsJson,
  type PasskeyServer,
} from "../support/passkey-client.js";
import { createManualClock } from "../support/server.js";

// Every refused ceremony answer is 401 and creates nothing: no identity, no
// passkey, no session. Real responses from headless Chromium's virtual
// authenticator, changed only where a test says so.

const manual = createManualClock(new Date());
let s: PasskeyServer;
let browser: TestBrowser;
const pages: PasskeyPage[] = [];
const timings = createTimings("passkeys-refusals");

beforeAll(async () => {
  ensureSdkBuilt();
  s = await startPasskeyServer({ clock: manual.clock });
  browser = await timings.time("launch chromium", () => launchBrowser());
});

afterAll(async () => {
  await Promise.all(pages.map((p) => p.context.close()));
  await browser?.close();
  await s?.server.close();
  console.log(`passkey refusal timings (${process.env.TEST_DATABASE_URL ? "PostgreSQL" : "SQLite"}):\n  ${timings.report().join("\n  ")}`);
});

async function device(): Promise<PasskeyPage> {
  const opened = await timings.time("open page + authenticator", () => openPasskeyPage(browser, `${s.origin}/sdk/example`));
  pages.push(opened);
  return opened;
}

/** Registers an identity with a passkey on `on`, through the raw ceremony; returns its ids. */
async function registered(on: PasskeyPage, identifier = newPasskeyIdentifier()) {
  const begun = await beginRegistration(s, identifier);
  const credential = await timings.time("navigator.credentials.create", () => createCredentialIn(on.page, begun.body.options));
  const finished = await finishRegistration(s, begun.body.ceremony_id, credential);
  expect(finished.status).toBe(200);
  return { identifier, identityId: finished.body.identity_id, credentialId: finished.body.credential_id };
}

function otherChallenge(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
}

/** Expects a 401 with `reason` and no new identity, passkey or session in the organisation. */
async function expectRefused(run: () => Promise<Parameters<typeof refusal>[0]>, reason: string, organizationId = s.organizationId) {
  const before = await countRows(s, organizationId);
  expect(refusal(await run())).toEqual({ status: 401, code: "unauthenticated", reason });
  expect(await countRows(s, organizationId)).toEqual(before);
}

describe("a ceremony answers once", () => {
  test("a replayed registration finish is refused", async () => {
    const { page } = await device();
    const begun = await beginRegistration(s, newPasskeyIdentifier());
    const credential = await createCredentialIn(page, begun.body.options);
    expect((await finishRegistration(s, begun.body.ceremony_id, credential)).status).toBe(200);
    await expectRefused(() => finishRegistration(s, begun.body.ceremony_id, credential), "ceremony_used");
  });

  test("a replayed login finish is refused", async () => {
    const on = await device();
    await registered(on);
    const begun = await beginLogin(s);
    const assertion = await timings.time("navigator.credentials.get", () => getAssertionIn(on.page, begun.body.options));
    expect((await finishLogin(s, begun.body.ceremony_id, assertion)).status).toBe(200);
    await expectRefused(() => finishLogin(s, begun.body.ceremony_id, assertion), "ceremony_used");
  });

  test("of concurrent finishes of one ceremony exactly one succeeds", async () => {
    const on = await device();
    await registered(on);
    const begun = await beginLogin(s);
    const assertion = await getAssertionIn(on.page, begun.body.options);
    const before = await countRows(s);
    const answers = await Promise.all(Array.from({ length: 6 }, () => finishLogin(s, begun.body.ceremony_id, assertion)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 401, 401, 401, 401, 401]);
    expect((await countRows(s)).sessions).toBe(before.sessions + 1);
  });
});

describe("a response must answer this ceremony's challenge", () => {
  test("registration with a tampered challenge is refused", async () => {
    const { page } = await device();
    const begun = await beginRegistration(s, newPasskeyIdentifier());
    const credential = await createCredentialIn(page, { ...begun.body.options, challenge: otherChallenge() });
    await expectRefused(() => finishRegistration(s, begun.body.ceremony_id, credential), "passkey_challenge_mismatch");
  });

  test("sign-in with a tampered challenge is refused", async () => {
    const on = await device();
    await registered(on);
    const begun = await beginLogin(s);
    const assertion = await getAssertionIn(on.page, { ...begun.body.options, challenge: otherChallenge() });
    await expectRefused(() => finishLogin(s, begun.body.ceremony_id, assertion), "passkey_challenge_mismatch");
  });

  test("a response to one ceremony presented for another is refused", async () => {
    const on = await device();
    await registered(on);
    const first = await beginLogin(s);
    const second = await beginLogin(s);
    const assertion = await getAssertionIn(on.page, first.body.options);
    await expectRefused(() => finishLogin(s, second.body.ceremony_id, assertion), "passkey_challenge_mismatch");
  });
});

describe("a response must come from the organisation's origins and relying party", () => {
  test("registration and sign-in from an origin that is not allowed are refused", async () => {
    const on = await device();
    const { identifier } = await registered(on);
    const registration = await beginRegistration(s, newPasskeyIdentifier());
    const login = await beginLogin(s, identifier);
    // http://localhost:1 may use the RP ID "localhost", but it is not one of the organisation's origins.
    const page = await openForeignOrigin(on, "http://localhost:1");
    const credential = await createCredentialIn(page, registration.body.options);
    await expectRefused(() => finishRegistration(s, registration.body.ceremony_id, credential), "passkey_origin_mismatch");
    const assertion = await getAssertionIn(page, login.body.options);
    await expectRefused(() => finishLogin(s, login.body.ceremony_id, assertion), "passkey_origin_mismatch");
  });

  test("registration and sign-in for another RP ID are refused", async () => {
    const on = await device();
    const { identifier, credentialId } = await registered(on);
    const foreign = "http://other.localhost:1";
    // The foreign origin is allowed, so that only the RP ID can refuse the responses below.
    await setIdentitySettings(s.server, { origins: [s.origin, foreign] });
    try {
      const registration = await beginRegistration(s, newPasskeyIdentifier());
      const login = await beginLogin(s, identifier);

      // A device whose copy of the registered passkey is scoped to another relying party,
      // "other.localhost": the same key pair and credential id, so only the RP ID differs.
      const [stored] = (await on.authenticator.credentials()) as unknown as {
        credentialId: string;
        privateKey: string;
        userHandle: string;
      }[];
      const elsewhere = await device();
      await elsewhere.authenticator.cdp.send("WebAuthn.addCredential", {
        authenticatorId: elsewhere.authenticator.authenticatorId,
        credential: {
          credentialId: stored!.credentialId,
          isResidentCredential: true,
          rpId: "other.localhost",
          privateKey: stored!.privateKey,
          userHandle: stored!.userHandle,
          signCount: 100,
        },
      });
      const page = await openForeignOrigin(elsewhere, foreign);

      const options = registration.body.options as OptionsJson & { rp: { id: string; name: string } };
      const credential = await createCredentialIn(page, { ...options, rp: { ...options.rp, id: "other.localhost" } });
      await expectRefused(() => finishRegistration(s, registration.body.ceremony_id, credential), "passkey_rp_id_mismatch");

      const assertion = await getAssertionIn(page, { ...login.body.options, rpId: "other.localhost" });
      expect(assertion.id).toBe(credentialId);
      await expectRefused(() => finishLogin(s, login.body.ceremony_id, assertion), "passkey_rp_id_mismatch");
    } finally {
      await setIdentitySettings(s.server, { origins: [s.origin] });
    }
  });
});

describe("a ceremony is bound to its time, organisation and kind", () => {
  test("a ceremony expires after 5 minutes", async () => {
    const on = await device();
    const { identifier } = await registered(on);
    const registration = await beginRegistration(s, newPasskeyIdentifier());
    const login = await beginLogin(s, identifier);
    const credential = await createCredentialIn(on.page, registration.body.options);
    const assertion = await getAssertionIn(on.page, login.body.options);
    manual.advance(5 * 60_000);
    await expectRefused(() => finishRegistration(s, registration.body.ceremony_id, credential), "ceremony_expired");
    await expectRefused(() => finishLogin(s, login.body.ceremony_id, assertion), "ceremony_expired");
  });

  test("a ceremony answered just within 5 minutes is accepted", async () => {
    const on = await device();
    const { identifier } = await registered(on);
    const login = await beginLogin(s, identifier);
    const assertion = await getAssertionIn(on.page, login.body.options);
    manual.advance(5 * 60_000 - 1000);
    expect((await finishLogin(s, login.body.ceremony_id, assertion)).status).toBe(200);
  });

  test("a ceremony of another organisation is refused, and stays unspent for its own", async () => {
    const on = await device();
    const other = await createPasskeyOrganization(s);
    const registration = await beginRegistration(s, newPasskeyIdentifier(), other.publishableKey);
    const credential = await createCredentialIn(on.page, registration.body.options);
    await expectRefused(() => finishRegistration(s, registration.body.ceremony_id, credential), "ceremony_not_found");
    expect(await countRows(s, other.organizationId)).toEqual({ identities: 0, passkeys: 0, sessions: 0 });
    // Its own organisation can still finish it.
    expect((await finishRegistration(s, registration.body.ceremony_id, credential, other.publishableKey)).status).toBe(200);

    const login = await beginLogin(s, undefined, other.publishableKey);
    const assertion = await getAssertionIn(on.page, login.body.options);
    await expectRefused(() => finishLogin(s, login.body.ceremony_id, assertion), "ceremony_not_found");
    expect((await finishLogin(s, login.body.ceremony_id, assertion, other.publishableKey)).status).toBe(200);

    // The backend's ceremonies too: a secret key of another organisation cannot finish them.
    const identity = await s.server.app.database.client.identity.findFirst({ where: { organizationId: other.organizationId } });
    const adding = await beginAddPasskey(s, identity!.id, other.secretKey);
    const second = await device();
    const added = await createCredentialIn(second.page, adding.body.options);
    await expectRefused(() => finishAddPasskey(s, adding.body.ceremonyId, added), "ceremony_not_found");
    await expectRefused(() => finishAddPasskey(s, adding.body.ceremonyId, added), "ceremony_not_found", other.organizationId);
    expect((await finishAddPasskey(s, adding.body.ceremonyId, added, "", other.secretKey)).status).toBe(200);
  });

  test("a ceremony of another kind is refused", async () => {
    const on = await device();
    const login = await beginLogin(s);
    const registration = await beginRegistration(s, newPasskeyIdentifier());
    const credential = await createCredentialIn(on.page, registration.body.options);
    // A registration response sent to a sign-in ceremony's id at register/finish.
    await expectRefused(() => finishRegistration(s, login.body.ceremony_id, credential), "ceremony_not_found");
  });
});

describe("a passkey signs in only its own identity, and never goes backwards", () => {
  test("a signature counter that went backwards (a cloned authenticator) is refused", async () => {
    const on = await device();
    const { credentialId } = await registered(on);
    for (let i = 0; i < 2; i++) {
      const begun = await beginLogin(s);
      expect((await finishLogin(s, begun.body.ceremony_id, await getAssertionIn(on.page, begun.body.options))).status).toBe(200);
    }
    const stored = await s.server.app.database.client.passkey.findUnique({ where: { id: credentialId } });
    expect(Number(stored!.counter)).toBeGreaterThan(1);

    // A clone of the authenticator with the same key but an older counter.
    const [original] = (await on.authenticator.credentials()) as unknown as {
      credentialId: string;
      privateKey: string;
      userHandle: string;
      rpId: string;
    }[];
    const clone = await device();
    await clone.authenticator.cdp.send("WebAuthn.addCredential", {
      authenticatorId: clone.authenticator.authenticatorId,
      credential: {
        credentialId: original!.credentialId,
        isResidentCredential: true,
        rpId: original!.rpId,
        privateKey: original!.privateKey,
        userHandle: original!.userHandle,
        signCount: 0,
      },
    });
    const begun = await beginLogin(s);
    const assertion = await getAssertionIn(clone.page, begun.body.options);
    expect(assertion.id).toBe(credentialId);
    await expectRefused(() => finishLogin(s, begun.body.ceremony_id, assertion), "passkey_counter_regression");
    expect((await s.server.app.database.client.passkey.findUnique({ where: { id: credentialId } }))!.counter).toBe(stored!.counter);
  });

  test("a passkey of identity A presented for identity B is refused", async () => {
    const on = await device();
    const a = await registered(on);
    const b = await registered(on);
    const begun = await beginLogin(s, b.identifier);
    expect((begun.body.options.allowCredentials as { id: string }[]).map((c) => c.id)).toEqual([b.credentialId]);
    // The authenticator is asked for A's passkey instead of B's.
    const assertion = await getAssertionIn(on.page, {
      ...begun.body.options,
      allowCredentials: [{ id: a.credentialId, type: "public-key" }],
    });
    expect(assertion.id).toBe(a.credentialId);
    await expectRefused(() => finishLogin(s, begun.body.ceremony_id, assertion), "passkey_not_allowed");
  });

  test("a user handle naming another identity is refused", async () => {
    const on = await device();
    const a = await registered(on);
    const b = await registered(on);
    const begun = await beginLogin(s);
    const assertion = await getAssertionIn(on.page, {
      ...begun.body.options,
      allowCredentials: [{ id: a.credentialId, type: "public-key" }],
    });
    const response = assertion.response as Record<string, unknown>;
    const forged = { ...assertion, response: { ...response, userHandle: Buffer.from(b.identityId).toString("base64url") } };
    await expectRefused(() => finishLogin(s, begun.body.ceremony_id, forged), "passkey_not_allowed");
  });
});
