import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { BrowserContext, Page } from "playwright-core";
import { hashToken } from "../../src/crypto/tokens.js";
import { addVirtualAuthenticator, launchBrowser, type TestBrowser } from "../support/browser.js";
import { applyOk, exportOk } from "../support/config-documents.js";
import { screenshot, unlabelledControls } from "../support/dashboard-screenshots.js";
import { issueOperatorSignInLink } from "../../src/composition/operator-links.js";
import {
  addMember,
  buildDashboardUi,
  cookieOf,
  dashboardAuthRpc,
  dashboardRpc,
  invite,
  ownerPassword,
  tokenOf,
  startDashboardServer,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { gatewayAdmin, muteGatewayHangUps, watchGateway } from "../support/gateway-control.js";
import { callIdentity, goodPassword, postRest } from "../support/identity-client.js";
import { openPasskeyPage, sdkIn, signedIn } from "../support/passkey-browser.js";
import { secretsApi } from "../support/secrets-client.js";
import { startWebhookReceiver, verifyDelivery } from "../support/webhook-receiver.js";

/**
 * The dashboard in a real headless Chromium, as an operator uses it: each
 * step checks the effect on the public API. Screenshots of every page go to
 * test-artifacts/dashboard/<database>/.
 */
describe("the dashboard in a real browser", () => {
  let server: DashboardTestServer;
  let browser: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  let org: string;
  /** The invitation link the members test hands to the invitee. */
  let invitationLink = "";

  const nav = (name: string) => page.getByRole("navigation", { name: "Dashboard sections" }).getByRole("link", { name, exact: true });
  const configStatus = async (bearer: string) => (await server.call(`/organization/${org}/config`, { bearer })).status;
  const registerWithPassword = async () =>
    (
      await postRest(
        server,
        "/identity/register/password",
        { identifier: `pw-${Math.random().toString(36).slice(2)}@example.com`, password: goodPassword },
        server.credentials.publishable_key,
      )
    ).status;

  /** What goes wrong on a page from now on: console errors, page errors, and answers of 400 or more. */
  function watchFailures(on: Page): string[] {
    const failures: string[] = [];
    on.on("console", (message) => {
      if (message.type() === "error") failures.push(`console: ${message.text()}`);
    });
    on.on("pageerror", (error) => failures.push(`page error: ${error.message}`));
    on.on("response", (response) => {
      if (response.status() >= 400) failures.push(`${response.status()} ${response.url()}`);
    });
    on.on("requestfailed", (request) => failures.push(`failed: ${request.url()}`));
    return failures;
  }

  async function expectAccessible(): Promise<void> {
    await expectAccessibleOn(page);
  }
  async function expectAccessibleOn(on: Page): Promise<void> {
    expect(await unlabelledControls(on)).toEqual([]);
  }

  beforeAll(async () => {
    buildDashboardUi();
    // localhost, not 127.0.0.1: passkeys need a host name as their relying-party ID.
    // Private networks allowed: the webhooks test's receiver listens on this machine.
    server = await startDashboardServer({ publicHost: "localhost", env: { WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true" } });
    org = server.credentials.organization_id;
    browser = await launchBrowser();
    context = await browser.newContext();
    page = await context.newPage();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  test("a first visit is greeted by a plain sign-in page, and no request fails", async () => {
    const visitor = await browser.newContext();
    const first = await visitor.newPage();
    const failures = watchFailures(first);
    await first.goto(`${server.origin}/dashboard/`);
    await first.waitForURL(/\/dashboard\/sign-in/);
    await first.getByRole("heading", { name: "Sign in to the dashboard" }).waitFor();
    expect(await first.locator(".status-info").allTextContents()).toEqual([]);
    expect(failures).toEqual([]);
    expect(new URL(first.url()).search).toBe("");
    await expectAccessibleOn(first);
    await screenshot(first, "00-first-visit");
    // A link into the dashboard leads to the same page, and back afterwards (once the sign-in page's own requests
    // are answered, or leaving it would abort them).
    await first.waitForLoadState("networkidle");
    await first.goto(`${server.origin}/dashboard/members`);
    await first.waitForURL("**/dashboard/sign-in?next=%2Fdashboard%2Fmembers");
    await first.getByRole("heading", { name: "Sign in to the dashboard" }).waitFor();
    expect(await first.content()).not.toContain("has ended");
    expect(failures).toEqual([]);
    await visitor.close();
  });

  test("the owner sets up the account from the one-time link and the token leaves the address bar", async () => {
    await page.goto(server.setupUrl);
    await page.getByRole("heading", { name: "Set up your account" }).waitFor();
    expect(page.url()).toBe(`${server.origin}/dashboard/setup`);
    await page.getByLabel("E-mail address").fill("owner@example.com");
    await page.getByLabel("Your name").fill("Olive Owner");
    await page.getByLabel("Password", { exact: true }).fill(ownerPassword);
    await page.getByLabel("Repeat the password").fill(ownerPassword);
    await expectAccessible();
    await screenshot(page, "01-setup");
    await page.getByRole("button", { name: "Set up and sign in" }).click();
    await page.waitForURL("**/dashboard/api-keys");
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();

    const cookie = (await context.cookies()).find((c) => c.name === "gatehouse_dashboard");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", secure: false, path: "/" });
    expect(await page.evaluate(() => document.cookie)).toBe("");

    // The link is spent: opening it again says so.
    const again = await context.newPage();
    await again.goto(server.setupUrl);
    await again.getByText("already been used").waitFor();
    await again.close();
  });

  test("sign-out ends the session; sign-in with the new password starts another", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/dashboard/sign-in");
    await page.goto(`${server.origin}/dashboard/members`);
    await page.waitForURL("**/dashboard/sign-in?next=%2Fdashboard%2Fmembers");
    await page.getByLabel("E-mail address").fill("owner@example.com");
    await page.getByLabel("Password").fill("wrong password here");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByText("the e-mail address or the password is wrong").waitFor();
    await page.getByLabel("Password").fill(ownerPassword);
    await expectAccessible();
    await screenshot(page, "02-sign-in");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/dashboard/members");
    await nav("API keys").click();
    await page.waitForURL("**/dashboard/api-keys");
  });

  test("the operator adds a passkey, signs out, signs in with it without typing anything; removed, it signs in no more", async () => {
    await addVirtualAuthenticator(page);
    await nav("Your passkeys").click();
    await page.getByRole("heading", { name: "Your passkeys", level: 1 }).waitFor();
    await page.getByText("No passkeys yet").waitFor();
    await page.getByLabel("Passkey name").fill("Test laptop");
    await page.getByRole("button", { name: "Add a passkey" }).click();
    await page.getByText('Added "Test laptop"').waitFor();
    await page.getByRole("cell", { name: "Test laptop", exact: true }).waitFor();
    await expectAccessible();
    await screenshot(page, "02a-your-passkeys");

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/dashboard/sign-in");
    await page.getByRole("button", { name: "Sign in with a passkey" }).waitFor();
    await expectAccessible();
    await screenshot(page, "02b-sign-in-passkey");
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL("**/dashboard/api-keys");
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    const cookie = (await context.cookies()).find((c) => c.name === "gatehouse_dashboard");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });

    // After typing the e-mail address, the same passkey signs in too.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/dashboard/sign-in");
    await page.getByLabel("E-mail address").fill("owner@example.com");
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL("**/dashboard/api-keys");

    // The list shows when it was last used.
    await nav("Your passkeys").click();
    const row = page.getByRole("row", { name: /Test laptop/ });
    await row.waitFor();
    expect(await row.getByRole("cell").nth(2).textContent()).toMatch(/UTC$/);
    await page.getByRole("button", { name: "Remove passkey Test laptop" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText('Removed "Test laptop".').waitFor();
    await page.getByText("No passkeys yet").waitFor();

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/dashboard/sign-in");
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.getByText("this passkey is not registered to any dashboard account").waitFor();
    await screenshot(page, "02c-sign-in-passkey-removed");
    await page.getByLabel("E-mail address").fill("owner@example.com");
    await page.getByLabel("Password").fill(ownerPassword);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/dashboard/api-keys");
  });

  test("an API key is shown once, works against the config API, is never shown again, and revoked it is refused", async () => {
    await page.getByLabel("Name").fill("browser-key");
    await page.getByLabel("Role").selectOption({ label: "member" });
    await page.getByRole("button", { name: "Create API key" }).click();
    const shown = page.getByTestId("new-api-key");
    await shown.waitFor();
    const key = ((await shown.textContent()) ?? "").trim();
    expect(key).toMatch(/^gk_[A-Za-z0-9_-]{43}$/);
    await page.getByRole("cell", { name: "browser-key", exact: true }).waitFor();
    await page.getByRole("cell", { name: `${key.slice(0, 9)}…` }).waitFor();
    await expectAccessible();
    await screenshot(page, "03-api-keys-created");

    expect(await configStatus(key)).toBe(200);

    await page.reload();
    await page.getByRole("cell", { name: "browser-key", exact: true }).waitFor();
    expect(await page.getByTestId("new-api-key").count()).toBe(0);
    expect(await page.content()).not.toContain(key);

    await page.getByRole("button", { name: "Revoke browser-key" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText('Revoked "browser-key".').waitFor();
    expect(await configStatus(key)).toBe(401);
    await screenshot(page, "04-api-keys");
  });

  test("gateways: a gateway key is shown once, follows the organisation and, revoked, is refused; consumer keys likewise", async () => {
    muteGatewayHangUps();
    await nav("Gateways").click();
    await page.getByRole("heading", { name: "Gateways", level: 1 }).waitFor();
    await page.getByText("No gateway keys yet.").waitFor();
    await page.getByText("No gateway has followed this organisation in the last day.").waitFor();
    await page.getByText("No consumers yet.").waitFor();

    await page.getByLabel("Gateway key name").fill("edge-1");
    await page.getByRole("button", { name: "Create gateway key" }).click();
    const shown = page.getByTestId("new-gateway-key");
    await shown.waitFor();
    const key = ((await shown.textContent()) ?? "").trim();
    expect(key).toMatch(/^gw_[A-Za-z0-9_-]{43}$/);
    await page.getByRole("cell", { name: "edge-1", exact: true }).waitFor();
    await page.getByRole("cell", { name: `${key.slice(0, 9)}…` }).waitFor();

    // The key follows the organisation; the gateway that uses it is listed as connected.
    expect((await server.call(`/organization/${org}/config`, { bearer: key })).status).toBe(200);
    const stream = watchGateway(server.url, key, { gatewayId: "edge-1.example" });
    expect((await stream.next()).event.case).toBe("snapshot");
    await page.reload();
    const connected = page.getByRole("row", { name: /edge-1\.example/ });
    await connected.waitFor();
    expect(await connected.getByRole("cell").nth(3).textContent()).toBe("connected");
    expect(await page.getByTestId("new-gateway-key").count()).toBe(0);
    expect(await page.content()).not.toContain(key);
    await expectAccessible();
    await screenshot(page, "05a-gateways");

    await page.getByRole("button", { name: "Revoke gateway key edge-1" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText('Revoked "edge-1".').waitFor();
    expect(ConnectError.from(await stream.ended()).code).toBe(Code.Unauthenticated);
    expect((await server.call(`/organization/${org}/config`, { bearer: key })).status).toBe(401);
    stream.close();

    // A consumer key reaches every gateway at once, and so does its revocation.
    const admin = gatewayAdmin(server);
    const follower = await admin.credentials.createGatewayKey({ organizationId: org, name: "watcher" });
    const watcher = watchGateway(server.url, follower.gatewayKey, { gatewayId: "watcher" });
    expect((await watcher.next()).event.case).toBe("snapshot");
    await page.getByLabel("Consumer name").fill("partner-acme");
    await page.getByRole("button", { name: "Create consumer key" }).click();
    const consumerKey = ((await page.getByTestId("new-consumer-key").textContent()) ?? "").trim();
    expect(consumerKey).toMatch(/^ck_[A-Za-z0-9_-]{43}$/);
    const created = await watcher.next();
    expect(created.event.case).toBe("consumerCreated");
    const consumer = created.event.case === "consumerCreated" ? created.event.value : undefined;
    expect(consumer?.keySha256).toBe(createHash("sha256").update(consumerKey).digest("hex"));
    const row = page.getByRole("row", { name: /partner-acme/ });
    await row.waitFor();
    expect(await row.textContent()).toContain(consumer?.consumerId);
    await screenshot(page, "05b-gateways-consumer");
    await page.getByRole("button", { name: "Revoke consumer partner-acme" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText('Revoked "partner-acme".').waitFor();
    const revoked = await watcher.next();
    expect(revoked.event).toEqual({ case: "consumerRevoked", value: expect.objectContaining({ consumerId: consumer?.consumerId }) });
    await page.reload();
    await page
      .getByRole("row", { name: /partner-acme/ })
      .getByText("revoked")
      .waitFor();
    expect(await page.content()).not.toContain(consumerKey);
    watcher.close();
    await admin.close();
  });

  test("webhooks: an endpoint's secret is shown once, a test event arrives signed with it, its attempt is listed and it is sent again", async () => {
    const receiver = await startWebhookReceiver();
    try {
      await nav("Webhooks").click();
      await page.getByRole("heading", { name: "Webhooks", level: 1 }).waitFor();
      await page.getByText("No webhook endpoints yet.").waitFor();
      // A URL the platform refuses is explained next to the field.
      await page.getByLabel("URL").fill("ftp://example.com/hook");
      await page.getByRole("button", { name: "Add endpoint" }).click();
      await page.getByText("must be an absolute https or http URL").waitFor();

      await page.getByLabel("URL").fill(`${receiver.url}/dashboard`);
      await page.getByLabel("Description").fill("billing sync");
      await page.getByLabel("webhook.test").check();
      await page.getByRole("button", { name: "Add endpoint" }).click();
      const shown = page.getByTestId("new-webhook-secret");
      await shown.waitFor();
      const secret = ((await shown.textContent()) ?? "").trim();
      expect(secret).toMatch(/^whsec_/);
      await page.getByRole("link", { name: `${receiver.url}/dashboard` }).waitFor();
      await expectAccessible();
      await screenshot(page, "05b-webhooks");

      await page.getByRole("button", { name: `Send a test event to ${receiver.url}/dashboard` }).click();
      const [delivered] = await receiver.until(1, (d) => d.path === "/dashboard");
      expect(verifyDelivery(secret, delivered!)).toMatchObject({ type: "webhook.test" });

      // The endpoint's page: the delivery with its status, its attempt's answer and timing, and "Send again".
      await page.getByRole("link", { name: `${receiver.url}/dashboard` }).click();
      await page.getByRole("heading", { name: "Webhook endpoint", level: 1 }).waitFor();
      const row = page.getByRole("row", { name: /webhook\.test/ });
      await row.getByText("delivered").waitFor();
      expect(await row.getByRole("cell").nth(3).textContent()).toMatch(/^200 in \d+ ms$/);
      await row.getByRole("button", { name: "Attempts" }).click();
      await page.getByRole("heading", { name: /^Attempts of webhook\.test/ }).waitFor();
      await page.getByRole("button", { name: `Send ${delivered!.id} again` }).click();
      await page.getByText(`webhook.test ${delivered!.id} is being sent again.`).waitFor();
      const copies = await receiver.until(2, (d) => d.path === "/dashboard");
      expect(copies[1]?.id).toBe(delivered!.id);
      expect(await page.content()).not.toContain(secret);
      await expectAccessible();
      await screenshot(page, "05c-webhook-endpoint");
    } finally {
      await receiver.close();
    }
  });

  test("the identity keys page shows prefixes and rotates the publishable key once", async () => {
    await nav("Identity keys").click();
    await page.getByRole("heading", { name: "Publishable key" }).waitFor();
    await page.getByText(`${server.credentials.publishable_key.slice(0, 9)}…`).waitFor();
    await expectAccessible();
    await screenshot(page, "05-identity-keys");

    const old = server.credentials.publishable_key;
    await page.getByRole("button", { name: "Rotate publishable key" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    const fresh = ((await page.getByTestId("new-publishable-key").textContent()) ?? "").trim();
    expect(fresh).toMatch(/^pk_[A-Za-z0-9_-]{43}$/);
    await page.getByText(`${fresh.slice(0, 9)}…`).waitFor();
    // The old key is unknown now (401); the new one authenticates (password sign-up is off: 403).
    const signUp = (key: string) =>
      postRest(server, "/identity/register/password", { identifier: "rotation@example.com", password: goodPassword }, key);
    expect((await signUp(old)).status).toBe(401);
    expect((await signUp(fresh)).status).toBe(403);
    server.credentials.publishable_key = fresh;
    await page.reload();
    await page.getByRole("heading", { name: "Publishable key" }).waitFor();
    expect(await page.getByTestId("new-publishable-key").count()).toBe(0);
  });

  test("password authentication follows the settings toggle; bad values are shown next to their field", async () => {
    await nav("Identity settings").click();
    const toggle = page.getByLabel("Password authentication");
    await toggle.waitFor();
    expect(await toggle.isChecked()).toBe(false);
    expect(await registerWithPassword()).toBe(403);

    await toggle.check();
    const lifetime = page.getByLabel("Session lifetime (seconds)");
    await lifetime.fill("5");
    await page.getByRole("button", { name: "Save settings" }).click();
    const error = page.locator(".field-error", { hasText: "must be a whole number from 60" });
    await error.waitFor();
    expect(await lifetime.getAttribute("aria-invalid")).toBe("true");
    expect(await lifetime.getAttribute("aria-describedby")).toContain(await error.getAttribute("id"));
    await screenshot(page, "06-identity-settings-error");
    expect(await registerWithPassword()).toBe(403);

    await lifetime.fill("3600");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByText("Settings saved").waitFor();
    expect(await registerWithPassword()).toBe(200);
    await expectAccessible();
    await screenshot(page, "07-identity-settings");

    await toggle.uncheck();
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByText("Settings saved").waitFor();
    expect(await registerWithPassword()).toBe(403);
  });

  test("an identity that signed up with a passkey is found, its passkey removed and its sessions revoked", async () => {
    const identifier = `passkey-user-${Date.now()}@example.com`;
    const user = await openPasskeyPage(browser, `${server.origin}/healthz`);
    const registered = signedIn(await sdkIn(user.page, server.credentials.publishable_key, { method: "register", identifier }));

    await nav("Identities").click();
    await page.getByLabel("Identifier contains").fill("PASSKEY-USER");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("link", { name: identifier }).click();
    await page.waitForURL(`**/dashboard/identities/${registered.identity_id}`);
    await page.getByTestId("password-state").filter({ hasText: "No password is set." }).waitFor();
    const removeButton = page.getByRole("button", { name: /^Remove passkey/ });
    await removeButton.waitFor();
    await page.getByRole("cell", { name: "live" }).waitFor();
    await expectAccessible();
    await screenshot(page, "08-identity");

    await removeButton.click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText("Passkey removed.").waitFor();
    await page.getByText("No passkeys.").waitFor();
    const login = await sdkIn(user.page, server.credentials.publishable_key, { method: "login", argument: identifier });
    expect(login.ok).toBe(false);

    const validate = () => callIdentity(server, "ValidateSession", { token: registered.session.token }, server.credentials.secret_key);
    expect((await validate()).status).toBe(200);
    await page.getByRole("button", { name: "Revoke all sessions" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText("1 session revoked.").waitFor();
    expect((await validate()).status).toBe(401);
    await screenshot(page, "09-identity-revoked");
    await user.context.close();

    await nav("Identities").click();
    await page.getByRole("link", { name: identifier }).waitFor();
    await screenshot(page, "10-identities");
  });

  test("secrets are listed per environment without values, and deleted", async () => {
    const secrets = secretsApi(server, server.credentials.api_key);
    await secrets.put("PAYMENT_TOKEN", "production", "value-that-must-never-appear", { tags: ["billing"] });
    await secrets.put("PAYMENT_TOKEN", "staging", "staging-value-never-shown");
    await nav("Secrets").click();
    await page.getByRole("cell", { name: "PAYMENT_TOKEN", exact: true }).waitFor();
    await page.getByText("billing").waitFor();
    expect(await page.content()).not.toContain("value-that-must-never-appear");
    await expectAccessible();
    await screenshot(page, "11-secrets");
    await page.getByRole("button", { name: "Delete PAYMENT_TOKEN" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText("Deleted PAYMENT_TOKEN from production.").waitFor();
    expect(await secrets.list("production")).toEqual([]);
    expect((await secrets.list("staging")).map((s) => s.name)).toEqual(["PAYMENT_TOKEN"]);

    // The sealing key: shown by key_id, rotated with a confirmation; the old key is listed as accepted for 24 hours.
    const before = (await secrets.publicKey()).key_id;
    await page.getByTestId("current-sealing-key").getByText(before).waitFor();
    await page.getByRole("button", { name: "Rotate sealing key" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText(/^Sealing key rotated: the current key_id is [0-9a-f]{64}\.$/).waitFor();
    const after = (await secrets.publicKey()).key_id;
    expect(after).not.toBe(before);
    await page.getByText(`Sealing key rotated: the current key_id is ${after}.`).waitFor();
    await page.getByTestId("previous-sealing-key").getByText(before).waitFor();
    await expectAccessible();
  }, 120_000);

  test("the configuration page shows the YAML and history, diffs two revisions and rolls back", async () => {
    // A route that names an upstream; the revisions differ in one of its targets.
    const doc = (target: string) =>
      `version: 1\nupstreams:\n  - name: pool\n    targets:\n      - {url: http://127.0.0.1:8080}\n      - {url: ${target}}\nroutes:\n  - name: plants\n    path: /plants\n    upstream: pool\n`;
    const first = await applyOk(server, server.credentials.api_key, doc("http://127.0.0.1:8081"));
    const second = await applyOk(server, server.credentials.api_key, doc("http://127.0.0.1:9090"));
    await nav("Configuration").click();
    await page
      .getByTestId("current-revision")
      .filter({ hasText: String(second.revision) })
      .waitFor();
    const yaml = await page.getByTestId("current-yaml").textContent();
    expect(yaml).toContain("upstreams:\n  - name: pool\n");
    expect(yaml).toContain("      - {url: http://127.0.0.1:9090}\n");
    expect(yaml).toContain("    upstream: pool\n");

    await page.getByLabel("From revision", { exact: true }).selectOption(String(first.revision));
    await page.getByLabel("To revision", { exact: true }).selectOption(String(second.revision));
    await page.getByRole("button", { name: "Show diff" }).click();
    await page.locator(".diff-removed", { hasText: "- {url: http://127.0.0.1:8081}" }).waitFor();
    await page.locator(".diff-added", { hasText: "- {url: http://127.0.0.1:9090}" }).waitFor();
    await expectAccessible();
    await screenshot(page, "12-configuration");

    await page.getByRole("button", { name: `Roll back to revision ${first.revision}` }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    await page.getByText(`Rolled back to revision ${first.revision}: now at revision ${second.revision + 1}.`).waitFor();
    const exported = await exportOk(server, server.credentials.api_key);
    expect(exported.revision).toBe(second.revision + 1);
    expect(exported.yaml).toContain("      - {url: http://127.0.0.1:8081}\n");
    await page
      .getByTestId("current-revision")
      .filter({ hasText: String(second.revision + 1) })
      .waitFor();
    await screenshot(page, "13-configuration-rolled-back");
  });

  test("members: an invitation gives a one-time link, listed as pending; the last admin cannot be demoted", async () => {
    await nav("Members").click();
    await page.getByText("No pending invitations.").waitFor();
    await page.getByLabel("E-mail address").fill("new.member@example.com");
    await page.getByLabel("Name", { exact: true }).fill("Nia New");
    await page.getByRole("button", { name: "Invite" }).click();
    const link = ((await page.getByTestId("invitation-link").textContent()) ?? "").trim();
    expect(link).toMatch(new RegExp(`^${server.origin}/dashboard/invitation#token=[A-Za-z0-9_-]{43}$`));
    const pending = page.getByRole("row", { name: /new\.member@example\.com/ });
    await pending.waitFor();
    expect(await pending.textContent()).toContain("Olive Owner <owner@example.com>");
    await expectAccessible();
    await screenshot(page, "14-members");

    // A new link replaces the first one, which stops working.
    await page.getByRole("button", { name: "New invitation link for new.member@example.com" }).click();
    await page.getByTestId("invitation-link").filter({ hasNotText: link }).waitFor();
    const stale = link;
    invitationLink = ((await page.getByTestId("invitation-link").textContent()) ?? "").trim();
    expect(invitationLink).not.toBe(stale);
    const staleToken = new URLSearchParams(new URL(stale).hash.slice(1)).get("token");
    expect((await dashboardAuthRpc(server, "InspectInvitation", { token: staleToken })).status).toBe(404);

    await page.getByLabel("Role of owner@example.com").selectOption({ label: "member" });
    await page
      .getByRole("row", { name: /owner@example\.com/ })
      .getByRole("button", { name: "Change role" })
      .click();
    await page.getByText("an organisation keeps at least one admin").waitFor();
  });

  test("a new person opens the invitation link in their own browser, creates their account and lands signed in", async () => {
    const invitee = await browser.newContext();
    const inviteePage = await invitee.newPage();
    await inviteePage.goto(invitationLink);
    await inviteePage.getByRole("heading", { name: "Accept your invitation" }).waitFor();
    expect(inviteePage.url()).toBe(`${server.origin}/dashboard/invitation`);
    await inviteePage.getByTestId("invitation-summary").filter({ hasText: "new.member@example.com" }).waitFor();
    expect(await inviteePage.getByLabel("Your name").inputValue()).toBe("Nia New");
    await inviteePage.getByLabel("Choose a password").fill("a fine new passphrase");
    await inviteePage.getByLabel("Repeat the password").fill("a fine new passphrase");
    await expectAccessibleOn(inviteePage);
    await screenshot(inviteePage, "14a-invitation");
    await inviteePage.getByRole("button", { name: "Create account and join" }).click();
    await inviteePage.waitForURL("**/dashboard/api-keys");
    // Members read but do not administer: no create form.
    await inviteePage.getByRole("heading", { name: "Keys", exact: true }).waitFor();
    expect(await inviteePage.getByRole("button", { name: "Create API key" }).count()).toBe(0);

    // The link is spent: opening it again says so, and creates nothing.
    const again = await invitee.newPage();
    await again.goto(invitationLink);
    await again.getByText("this invitation link cannot be used").waitFor();
    await invitee.close();

    await nav("Members").click();
    await page.getByText("No pending invitations.").waitFor();
    await page.getByRole("cell", { name: "new.member@example.com", exact: true }).waitFor();
  });

  test("someone who already has an account signs in on the invitation page and joins the other organisation", async () => {
    const other = await server.app.tenancy.createOrganization("Second organisation");
    const otherOwner = cookieOf(
      await dashboardAuthRpc(server, "SetUpAccount", {
        token: tokenOf(other.dashboardSetupUrl),
        email: "boss@example.org",
        display_name: "Bo Boss",
        password: "boss good passphrase",
      }),
    );
    const invited = await invite(server, otherOwner, { organizationId: other.organizationId, email: "new.member@example.com" });
    const invitee = await browser.newContext();
    const inviteePage = await invitee.newPage();
    await inviteePage.goto(invited.url);
    await inviteePage.getByLabel("Your password").fill("a fine new passphrase");
    // Joining replaces the account's password (docs/dashboard.md, "Invitations").
    await inviteePage.getByLabel("Choose a new password").fill("a finer newer passphrase");
    await inviteePage.getByLabel("Repeat the new password").fill("a finer newer passphrase");
    await expectAccessibleOn(inviteePage);
    await inviteePage.getByRole("button", { name: "Sign in and join" }).click();
    await inviteePage.waitForURL("**/dashboard/api-keys");
    // The organisation just joined is the one shown; the other stays a choice away.
    const picker = inviteePage.getByLabel("Organisation");
    await picker.waitFor();
    expect(await picker.inputValue()).toBe(other.organizationId);
    await screenshot(inviteePage, "14b-invitation-joined");
    await invitee.close();
  });

  test("the layout holds on a phone-sized screen", async () => {
    const phone = await browser.browser.newContext({ viewport: { width: 375, height: 740 }, storageState: await context.storageState() });
    const small = await phone.newPage();
    await small.goto(`${server.origin}/dashboard/api-keys`);
    await small.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    const overflow = await small.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(small, "15-api-keys-phone");
    await phone.close();
  });

  test("a page of another origin cannot use the operator's session", async () => {
    // The browser itself: a request from another origin carries no cookie (SameSite=Strict) and no dashboard header.
    const foreign = await context.newPage();
    await context.route("http://other.localhost:1/**", (route) =>
      route.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>other</title>" }),
    );
    await foreign.goto("http://other.localhost:1/");
    const outcome = await foreign.evaluate(async (target) => {
      try {
        const response = await fetch(`${target}/svc.v1.DashboardService/ListApiKeys`, {
          method: "POST",
          credentials: "include",
          headers: { "content-type": "application/json", "x-gatehouse-dashboard": "1" },
          body: JSON.stringify({ organizationId: "x" }),
        });
        return `status ${response.status}`;
      } catch (error) {
        return `blocked: ${String(error)}`;
      }
    }, server.origin);
    // The CORS preflight is not granted, so the browser never sends the request.
    expect(outcome).toMatch(/^blocked/);
    await foreign.close();
  });

  test("when the session ends elsewhere, the next action leads to sign-in and back to the page", async () => {
    const cookie = (await context.cookies()).find((c) => c.name === "gatehouse_dashboard");
    expect(cookie).toBeDefined();
    await dashboardAuthRpc(server, "SignOut", {}, { cookie: `gatehouse_dashboard=${cookie?.value ?? ""}` });
    await nav("Members").click();
    await page.waitForURL("**/dashboard/sign-in?next=%2Fdashboard%2Fmembers");
    await page.getByText("Your dashboard session has ended").waitFor();
    await page.getByLabel("E-mail address").fill("owner@example.com");
    await page.getByLabel("Password").fill(ownerPassword);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/dashboard/members");
    await page.getByRole("cell", { name: "new.member@example.com", exact: true }).waitFor();
  });

  test("a session that ended while the browser was away is greeted as ended, and no request fails", async () => {
    const signedIn = await dashboardAuthRpc(server, "SignIn", { email: "owner@example.com", password: ownerPassword });
    const value = cookieOf(signedIn).split("=")[1] ?? "";
    const away = await browser.newContext();
    await away.addCookies([{ name: "gatehouse_dashboard", value, url: server.origin, httpOnly: true, sameSite: "Strict" }]);
    const returning = await away.newPage();
    await returning.goto(`${server.origin}/dashboard/members`);
    await returning.getByRole("heading", { name: "Members", level: 1 }).waitFor();
    // The heading comes before the lists of members and invitations: wait for their requests too, or the reload
    // below aborts one of them (a failure of the test's making, not the dashboard's).
    await returning.waitForLoadState("networkidle");
    // Past its lifetime while nobody looked.
    await server.app.database.client.dashboardSession.updateMany({
      where: { hash: hashToken(value) },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    const failures = watchFailures(returning);
    await returning.reload();
    await returning.waitForURL("**/dashboard/sign-in?next=%2Fdashboard%2Fmembers");
    await returning.getByText("Your dashboard session has ended: sign in again.").waitFor();
    expect(failures).toEqual([]);
    await screenshot(returning, "17-session-ended");
    await away.close();
  });

  test("after a recovery sign-in the dashboard asks for a password until one is set, with no current one", async () => {
    const owner = cookieOf(await dashboardAuthRpc(server, "SignIn", { email: "owner@example.com", password: ownerPassword }));
    const member = await addMember(server, owner, { email: "recovering@example.com", password: "the forgotten passphrase" });
    const link = await issueOperatorSignInLink(server.app, { email: "recovering@example.com" });
    const recovering = await browser.newContext();
    const person = await recovering.newPage();
    await person.goto(link.url);
    await person.waitForURL("**/dashboard/api-keys");
    // The recovery ended the session the account had and removed its password.
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie: member.cookie })).status).toBe(401);
    const notice = person.getByTestId("no-password-notice");
    await notice.waitFor();
    await screenshot(person, "18-no-password");
    await notice.getByRole("link", { name: "choose one" }).click();
    await person.getByRole("heading", { name: "Password", level: 2 }).waitFor();
    expect(await person.getByLabel("Current password").count()).toBe(0);
    await person.getByLabel("New password", { exact: true }).fill("the remembered passphrase");
    await person.getByLabel("Repeat the new password").fill("the remembered passphrase");
    await expectAccessibleOn(person);
    await person.getByRole("button", { name: "Set password" }).click();
    await person.getByText("Your password is set.").waitFor();
    await person.getByRole("navigation", { name: "Dashboard sections" }).getByRole("link", { name: "API keys", exact: true }).click();
    await person.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    expect(await person.getByTestId("no-password-notice").count()).toBe(0);
    const signIn = await dashboardAuthRpc(server, "SignIn", { email: "recovering@example.com", password: "the remembered passphrase" });
    expect(signIn.status).toBe(200);
    await recovering.close();
  });
});
