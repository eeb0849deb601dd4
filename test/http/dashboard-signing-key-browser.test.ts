import type { Page } from "playwright-core";
import { launchBrowser, type TestBrowser } from "../support/browser.js";
import { screenshot, unlabelledControls } from "../support/dashboard-screenshots.js";
import {
  addMember,
  buildDashboardUi,
  ownerPassword,
  setUpOwner,
  startDashboardServer,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { kidOf, signInByMagicLink } from "../support/session-tokens.js";

/**
 * The identity keys page in a real headless Chromium: it lists the
 * organisation's session signing keys by kid and offers admins the rotation;
 * a member sees the keys without the button.
 */
describe("the session signing key on the identity keys page", () => {
  let server: DashboardTestServer;
  let browser: TestBrowser;
  let org: string;

  async function signInAs(page: Page, email: string, password: string): Promise<void> {
    await page.goto(`${server.origin}/dashboard/identity-keys`);
    await page.getByLabel("E-mail address").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("heading", { name: "Session signing key" }).waitFor();
  }

  beforeAll(async () => {
    buildDashboardUi();
    server = await startDashboardServer();
    org = server.credentials.organization_id;
    const owner = await setUpOwner(server);
    await addMember(server, owner, {
      organizationId: org,
      email: "mia@example.com",
      displayName: "Mia",
      password: "mia's good passphrase",
    });
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  test("an admin sees the live kid and rotates it: the page and the next session show the new kid, the old one listed as retired", async () => {
    const before = kidOf(await signInByMagicLink(server));
    const page = await (await browser.newContext()).newPage();
    await signInAs(page, "owner@example.com", ownerPassword);
    await page.getByTestId("live-kid").getByText(before).waitFor();
    expect(await unlabelledControls(page)).toEqual([]);
    await screenshot(page, "identity-keys-signing-key");

    await page.getByRole("button", { name: "Rotate session signing key" }).click();
    await page.getByRole("button", { name: "Confirm" }).click();
    // The confirmation names the new kid; the list of keys is reloaded after it, so the page is
    // waited on until it shows that kid as live and the old one as retired.
    const rotated = page.getByText("Session signing key rotated");
    await rotated.waitFor();
    const live = /signed by ([\w-]+)/.exec((await rotated.textContent()) ?? "")?.[1] ?? "";
    expect(live).not.toBe("");
    expect(live).not.toBe(before);
    await page.getByTestId("live-kid").getByText(live, { exact: true }).waitFor();
    await page.getByTestId("retired-kid").getByText(before, { exact: true }).waitFor();
    expect(((await page.getByTestId("live-kid").textContent()) ?? "").trim()).toBe(live);
    expect(kidOf(await signInByMagicLink(server))).toBe(live);
  }, 120_000);

  test("a member sees the keys but no rotation", async () => {
    const page = await (await browser.newContext()).newPage();
    await signInAs(page, "mia@example.com", "mia's good passphrase");
    await page.getByTestId("live-kid").waitFor();
    expect(await page.getByRole("button", { name: "Rotate session signing key" }).count()).toBe(0);
  }, 120_000);
});
