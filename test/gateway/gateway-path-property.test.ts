import fc from "fast-check";
import { connect } from "node:net";
import { readRequestPath } from "../../src/domain/config/request-path.js";
import { startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";
import { startWitness, type Witness } from "../support/raw-http.js";

/**
 * The gateway's path handling as a property (docs/security.md, "The
 * gateway"): for any request target, either the gateway refuses it and the
 * upstream sees nothing, or the path the upstream receives, read the way a
 * WHATWG URL parser (Node, browsers, Express) and a servlet container
 * (Tomcat, Spring) read paths, is matched by the same route and the same
 * rules the gateway applied. The routes send to distinct upstream prefixes,
 * so the witness tells which route the gateway chose.
 */
let witness: Witness;
let gw: TestGateway;

beforeAll(async () => {
  witness = await startWitness();
  gw = await startTestGateway(
    {},
    stateFromYaml(`version: 1
plugins:
  - name: signed-in
    type: session-auth
rules:
  - name: no-admin
    match: {path_prefix: /admin}
    action: deny
routes:
  - name: open
    path: /*
    upstream: ${witness.url}/r-open
    rules: [no-admin]
  - name: pub
    path: /pub/*
    upstream: ${witness.url}/r-pub
  - name: sess
    path: /sess/*
    upstream: ${witness.url}/r-sess
    plugins: [signed-in]
`),
  );
});
afterAll(async () => {
  await gw.close();
  await witness.close();
});

/** The route and rule decision the document above makes on a matching-form path. */
function decide(match: string): { route: string; denied: boolean } {
  const under = (base: string) => match === base || match.startsWith(`${base}/`);
  const route = under("/sess") ? "sess" : under("/pub") ? "pub" : "open";
  return { route, denied: route === "open" && match.startsWith("/admin") };
}

/** A WHATWG URL parser's path (what Node's `new URL` and browsers make of it). */
function whatwgPath(path: string): string {
  return new URL(path, "http://upstream.test").pathname;
}

/**
 * A servlet container's path (Tomcat's CoyoteAdapter with its defaults):
 * `;` parameters removed from each segment, then percent-decoded (an encoded
 * "/", "\" or NUL is refused), then "\" refused, "//" collapsed and dot
 * segments resolved (above the root is refused). Undefined: refused (400).
 */
function servletPath(path: string): string | undefined {
  const withoutParameters = path
    .split("/")
    .map((segment) => (segment.includes(";") ? segment.slice(0, segment.indexOf(";")) : segment))
    .join("/");
  let decoded = "";
  for (let i = 0; i < withoutParameters.length; i++) {
    if (withoutParameters[i] === "%") {
      const byte = Number.parseInt(withoutParameters.slice(i + 1, i + 3), 16);
      if (Number.isNaN(byte) || byte === 0x2f || byte === 0x5c || byte === 0) return undefined;
      decoded += String.fromCharCode(byte);
      i += 2;
    } else decoded += withoutParameters[i];
  }
  if (decoded.includes("\\")) return undefined;
  const out: string[] = [];
  for (const segment of decoded.split("/").slice(1)) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (out.length === 0) return undefined;
      out.pop();
    } else out.push(segment);
  }
  return `/${out.join("/")}${decoded.endsWith("/") && out.length > 0 ? "/" : ""}`;
}

/** A decoded path written back as a request path, so that the gateway's reader can place it. */
function encodeDecoded(path: string): string {
  let out = "";
  for (const c of path) {
    out += /[A-Za-z0-9\-._~!$&'()*+,=:@/]/.test(c) ? c : `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** One request on a fresh connection: the status of the first answer (0 when the connection closed without one). */
function statusOf(target: string): Promise<number> {
  const { port } = new URL(gw.url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), "127.0.0.1");
    let text = "";
    const done = () => {
      socket.destroy();
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve(status ? Number(status[1]) : 0);
    };
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
      const headEnd = text.indexOf("\r\n\r\n");
      if (headEnd === -1) return;
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, headEnd))?.[1] ?? 0);
      if (text.length >= headEnd + 4 + length) done();
    });
    socket.on("close", done);
    socket.on("error", () => {});
    socket.write(`GET ${target} HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n`, "latin1");
  });
}

/** The names the routes and the rule use, and their spellings that a parser may read as them. */
const name = fc.constantFrom("admin", "pub", "sess", "ADMIN", "%61dmin", "adm%69n", "%73ess", "p%75b", "a");
/** What can change how a path is read: dots, separators, parameters, escapes. */
const tricky = fc.constantFrom(
  "..",
  ".",
  "%2e",
  "%2E",
  "%2e%2e",
  ";",
  ";v=1",
  ";x",
  "%2f",
  "%2F",
  "%5c",
  "%5C",
  "\\",
  "%00",
  "%25",
  "%3b",
  "%3B",
  "%20",
  "%23",
  "%3f",
  "~",
  "%7e",
  "!",
  "%21",
  "*",
  "@",
  ":",
  "%3a",
  "%e9",
  "%zz",
  "/",
  "",
);
const token = fc.oneof({ arbitrary: name, weight: 3 }, { arbitrary: tricky, weight: 2 });
const segment = fc.array(token, { minLength: 1, maxLength: 3 }).map((tokens) => tokens.join(""));
const target = fc
  .tuple(fc.array(segment, { minLength: 1, maxLength: 4 }), fc.constantFrom("", "?q=1", "?a=/admin&b=%2e%2e"))
  .map(([segments, query]) => `/${segments.join("/")}${query}`);

test("whatever the target, the upstream receives a path that every parser reads as the route and rules the gateway applied", async () => {
  const outcomes = { forwarded: 0, refused: 0, denied: 0, unauthenticated: 0 };
  await fc.assert(
    fc.asyncProperty(target, async (sent) => {
      const seenBefore = witness.requests.length;
      const status = await statusOf(sent);
      if (status !== 200) {
        // Refused (400), denied by the rule (403) or without the session the route needs (401): nothing went upstream.
        expect([400, 401, 403]).toContain(status);
        expect(witness.requests.length).toBe(seenBefore);
        outcomes[status === 400 ? "refused" : status === 403 ? "denied" : "unauthenticated"]++;
        return;
      }
      outcomes.forwarded++;
      expect(witness.requests.length).toBe(seenBefore + 1);
      const received = witness.requests.at(-1)!.url;
      const [, chosen, forwarded] = /^\/r-([a-z]+)(\/[^?]*)/.exec(received) ?? [];
      expect(chosen).toBeDefined();
      // The forwarded path is canonical: reading it again changes nothing.
      expect(readRequestPath(forwarded!)?.forward).toBe(forwarded);
      const servlet = servletPath(forwarded!);
      // WHATWG keeps percent-encoding (it is read as it is); a servlet path is decoded (it is written back first).
      const views = [whatwgPath(forwarded!), servlet === undefined ? undefined : encodeDecoded(servlet)];
      for (const view of views) {
        if (view === undefined) continue; // that parser refuses the path: nothing is served
        const match = readRequestPath(view)?.match;
        expect(match).toBeDefined();
        const decision = decide(match!);
        expect({ sent, view, route: decision.route, denied: decision.denied }).toEqual({ sent, view, route: chosen, denied: false });
      }
    }),
    { numRuns: 600 },
  );
  // The generator reaches every outcome, so the property is not vacuous.
  expect(outcomes.forwarded).toBeGreaterThan(50);
  expect(outcomes.refused).toBeGreaterThan(20);
  expect(outcomes.denied + outcomes.unauthenticated).toBeGreaterThan(5);
});
