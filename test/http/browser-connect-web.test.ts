import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { basename, join } from "node:path";
import { build, type Plugin } from "esbuild";
import type { Page } from "playwright-core";
import type { Outcome, Target } from "../support/connect-web-page.js";
import { launchBrowser, type TestBrowser } from "../support/browser.js";
import { callIdentity, enablePasswords, goodPassword, newIdentifier, reasonOf } from "../support/identity-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * A web app on another origin signs users in with @connectrpc/connect-web and
 * the publishable key, over Connect and over gRPC-Web, in headless Chromium
 * (docs/identity.md "From a web page on another origin"; CORS:
 * docs/security.md "The platform API"). The page is served by a server of its
 * own, on another host and port than the platform; its code is bundled with
 * esbuild: test/support/connect-web-page.ts, and the docs' example itself.
 */
let server: TestServer;
let browser: TestBrowser;
let appServer: Server;
let page: Page;
/** What the browser printed: a request CORS blocks is reported there. */
const consoleLines: string[] = [];

/** The TypeScript example of docs/identity.md "From a web page on another origin". */
function docsExample(): string {
  const doc = readFileSync(join(process.cwd(), "docs", "identity.md"), "utf8");
  const section = doc.slice(doc.indexOf("## From a web page on another origin"));
  const example = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  if (!example) throw new Error("docs/identity.md has no TypeScript example under 'From a web page on another origin'");
  return example;
}

/**
 * The page's modules: /harness.js, and the docs' example as written
 * (/docs-connect.js) and with the gRPC-Web transport the docs say to swap in
 * (/docs-grpc-web.js), pointed at this server with its publishable key.
 */
async function bundlePage(): Promise<Map<string, string>> {
  const root = process.cwd();
  const example = docsExample().replaceAll("https://auth.example.com", server.url).replaceAll("pk_...", server.credentials.publishable_key);
  expect(example).toContain(server.credentials.publishable_key);
  const docs: Plugin = {
    name: "docs-example",
    setup(bundler) {
      bundler.onResolve({ filter: /^docs-example:/ }, (args) => ({ path: args.path.slice("docs-example:".length), namespace: "docs" }));
      bundler.onLoad({ filter: /.*/, namespace: "docs" }, (args) => ({
        contents: args.path === "grpc-web" ? example.replaceAll("createConnectTransport", "createGrpcWebTransport") : example,
        loader: "ts",
        resolveDir: root,
      }));
    },
  };
  const result = await build({
    entryPoints: {
      harness: join(root, "test", "support", "connect-web-page.ts"),
      "docs-connect": "docs-example:connect",
      "docs-grpc-web": "docs-example:grpc-web",
    },
    bundle: true,
    format: "esm",
    platform: "browser",
    target: ["es2020"],
    write: false,
    outdir: join(root, "page"),
    plugins: [docs],
    logLevel: "silent",
  });
  return new Map(result.outputFiles.map((file) => [`/${basename(file.path)}`, file.text]));
}

beforeAll(async () => {
  server = await startTestServer();
  await enablePasswords(server);
  const [files, launched] = await Promise.all([bundlePage(), launchBrowser()]);
  browser = launched;
  appServer = createServer((req, res) => {
    req.resume();
    const script = files.get(req.url ?? "");
    res.writeHead(200, { "content-type": script ? "text/javascript; charset=utf-8" : "text/html; charset=utf-8" });
    res.end(script ?? "<!doctype html><title>an app on another origin</title>");
  });
  await new Promise<void>((resolve) => appServer.listen(0, "127.0.0.1", resolve));
  const context = await browser.newContext();
  page = await context.newPage();
  page.on("console", (message) => consoleLines.push(message.text()));
  // localhost, not 127.0.0.1: another host and another port than the platform's, so another origin.
  await page.goto(`http://localhost:${(appServer.address() as AddressInfo).port}/`);
  expect(new URL(page.url()).origin).not.toBe(new URL(server.url).origin);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  appServer?.close();
  await server?.close();
});

type Harness = typeof import("../support/connect-web-page.js");
type Call = "registerPassword" | "loginPassword" | "generateMagicLink";

/** Runs one harness function in the page (the page's own module, /harness.js). */
function inPage(call: Call, target: Target, ...args: string[]): Promise<Outcome> {
  return page.evaluate(
    async ({ call, target, args }) => {
      const url = "/harness.js";
      const harness = (await import(url)) as Harness;
      return (harness[call] as (target: Target, ...rest: string[]) => Promise<Outcome>)(target, ...args);
    },
    { call, target, args },
  );
}

/** Calls the docs' signIn in the page, from the Connect or the gRPC-Web build of the example. */
function docsSignIn(door: "connect" | "grpc-web", identifier: string, password: string) {
  return page.evaluate(
    async ({ url, identifier, password }) => {
      const example = (await import(url)) as { signIn(identifier: string, password: string): Promise<Record<string, string>> };
      return example.signIn(identifier, password);
    },
    { url: `/docs-${door}.js`, identifier, password },
  );
}

/** The identity a session token belongs to, as the backend checks it (secret key). */
async function sessionOwner(token: string): Promise<unknown> {
  const validated = await callIdentity(server, "ValidateSession", { token }, server.credentials.secret_key);
  expect(validated.status).toBe(200);
  return validated.body.identityId;
}

describe.each(["connect", "grpc-web"] as const)("a page on another origin, over %s", (door) => {
  const target = (): Target => ({ door, baseUrl: server.url, key: server.credentials.publishable_key });

  test("signs a user up and in with the publishable key; the sessions are the backend's to check", async () => {
    const identifier = newIdentifier(`page-${door}`);
    const registered = await inPage("registerPassword", target(), identifier, goodPassword);
    if (!registered.ok) throw new Error(`${registered.code}: ${registered.message}`);
    expect(await sessionOwner(registered.token)).toBe(registered.identityId);

    const signedIn = await inPage("loginPassword", target(), identifier, goodPassword);
    expect(signedIn).toMatchObject({ ok: true, identityId: registered.identityId });
    if (signedIn.ok) expect(await sessionOwner(signedIn.token)).toBe(registered.identityId);
  });

  test("reads the error of a failed call: its code and message", async () => {
    const identifier = newIdentifier(`page-${door}-wrong`);
    expect((await inPage("registerPassword", target(), identifier, goodPassword)).ok).toBe(true);
    const wrong = await inPage("loginPassword", target(), identifier, "not the password at all");
    const fromNode = await callIdentity(
      server,
      "LoginPassword",
      { identifier, password: "not the password at all" },
      server.credentials.publishable_key,
    );
    expect(reasonOf(fromNode)).toBe("invalid_credentials");
    expect(wrong).toEqual({ ok: false, code: "Unauthenticated", message: fromNode.body.message });

    const taken = await inPage("registerPassword", target(), identifier, goodPassword);
    expect(taken).toMatchObject({ ok: false, code: "AlreadyExists" });
  });

  test("cannot call a backend RPC: the browser blocks the call before it is sent, where Node gets permission_denied", async () => {
    const before = consoleLines.length;
    const blocked = await inPage("generateMagicLink", target(), newIdentifier("blocked"));
    expect(blocked.ok).toBe(false);
    if (blocked.ok) return;
    // A CORS failure is a network error to the page: no code or message of the server's.
    expect(blocked.code).not.toBe("PermissionDenied");
    expect(blocked.message).toMatch(/fetch/i);
    expect(consoleLines.slice(before).join("\n")).toMatch(/GenerateMagicLink[\s\S]*CORS policy/);
    const fromNode = await callIdentity(server, "GenerateMagicLink", { identifier: newIdentifier() }, server.credentials.publishable_key);
    expect(fromNode.status).toBe(403);
  });

  test("the docs' example signs in, and reports a wrong password and then too many attempts", async () => {
    const identifier = newIdentifier(`docs-${door}`);
    const registered = await inPage("registerPassword", target(), identifier, goodPassword);
    if (!registered.ok) throw new Error(`${registered.code}: ${registered.message}`);

    const signedIn = await docsSignIn(door, identifier, goodPassword);
    expect(signedIn.identityId).toBe(registered.identityId);
    expect(await sessionOwner(signedIn.token ?? "")).toBe(registered.identityId);

    const attempts: Record<string, string>[] = [];
    for (let i = 0; i < 6; i++) attempts.push(await docsSignIn(door, identifier, "not the password at all"));
    expect(attempts.map((a) => a.error)).toEqual([...Array(5).fill("Unauthenticated"), "ResourceExhausted"]);
    expect(attempts[5]?.message).toMatch(/too many failed sign-ins/);
  });
});
