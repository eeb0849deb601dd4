import type { TestServer } from "./server.js";

/** Builders for the credentials a test needs beyond those `init` printed. */
export async function createApiKey(server: TestServer, role: "admin" | "member", organizationId = server.credentials.organization_id) {
  const created = await server.app.tenancy.createApiKey({
    organizationId,
    name: `test ${role} ${Math.random().toString(36).slice(2, 8)}`,
    role,
  });
  return created;
}

export async function createOtherOrganization(server: TestServer) {
  const org = await server.app.tenancy.createOrganization("Other organisation");
  const admin = await createApiKey(server, "admin", org.organizationId);
  return { ...org, adminKey: admin.apiKey };
}

/** POSTs a Connect JSON request. */
export function connectCall(server: TestServer, path: string, body: unknown, bearer?: string, headers: Record<string, string> = {}) {
  return server.call(path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    ...(bearer !== undefined ? { bearer } : {}),
  });
}
