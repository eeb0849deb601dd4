import { buildDashboardUi, startDashboardServer, type DashboardTestServer } from "../support/dashboard-server.js";

describe("the dashboard UI is served by the platform", () => {
  let server: DashboardTestServer;
  beforeAll(async () => {
    buildDashboardUi();
    server = await startDashboardServer();
  });
  afterAll(() => server.close());

  test("/dashboard redirects to /dashboard/, and every page path answers the single page under a strict CSP", async () => {
    const bare = await fetch(`${server.url}/dashboard`, { redirect: "manual" });
    expect(bare.status).toBe(308);
    expect(bare.headers.get("location")).toBe("/dashboard/");
    for (const path of [
      "/dashboard/",
      "/dashboard/setup",
      "/dashboard/api-keys",
      "/dashboard/identities/0b4f3a52-8d3c-4d56-9e0e-7f1f8e1b2c3d",
    ]) {
      const response = await fetch(`${server.url}${path}`);
      expect({ path, status: response.status }).toEqual({ path, status: 200 });
      expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(response.headers.get("content-security-policy")).toContain("script-src 'self'");
      expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(response.headers.get("x-content-type-options")).toBe("nosniff");
      expect(response.headers.get("referrer-policy")).toBe("no-referrer");
      expect(await response.text()).toContain('<script type="module" src="/dashboard/assets/app.js">');
    }
  });

  test("assets have their types, revalidate by ETag, and nothing outside the build is reachable", async () => {
    const script = await fetch(`${server.url}/dashboard/assets/app.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    const etag = script.headers.get("etag") as string;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    const again = await fetch(`${server.url}/dashboard/assets/app.js`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    expect((await fetch(`${server.url}/dashboard/assets/app.css`)).headers.get("content-type")).toBe("text/css; charset=utf-8");
    for (const path of [
      "/dashboard/assets/missing.js",
      "/dashboard/assets/..%2F..%2Fpackage.json",
      "/dashboard/assets/.hidden.js",
      "/dashboard/assets/app.ts",
    ]) {
      expect({ path, status: (await fetch(`${server.url}${path}`)).status }).toEqual({ path, status: 404 });
    }
  });
});
