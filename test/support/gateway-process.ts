import { spawn, type ChildProcess } from "node:child_process";
import { gatehouseBin } from "./cli.js";
import { freePort } from "./free-port.js";

export { freePort };

/** Polls condition (errors count as not yet) until it holds, or fails naming what was awaited. */
export async function until(condition: () => Promise<boolean> | boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await condition()) return;
    } catch {
      // not answering yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface GatewayProcess {
  id: string;
  url: string;
  adminUrl: string;
  cache: string;
  child: ChildProcess;
  /** What it wrote (warnings and errors: LOG_LEVEL=warn). */
  output(): string;
  stop(): Promise<void>;
}

/** The configuration revision a gateway reports in its /metrics (-1 without one). */
export async function revisionAt(gateway: Pick<GatewayProcess, "adminUrl">): Promise<number> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("gatehouse_gateway_config_revision "));
  return line ? Number(line.split(" ")[1]) : -1;
}

/** `gatehouse gateway` on ephemeral ports, following `urls`; resolves once it listens. */
export async function startGatewayProcess(options: {
  id: string;
  key: string;
  urls: string[];
  cache: string;
  env?: Record<string, string>;
}): Promise<GatewayProcess> {
  const cache = options.cache;
  const child = spawn(process.execPath, [gatehouseBin, "gateway", "--json"], {
    env: {
      ...process.env,
      GATEHOUSE_URL: options.urls.join(","),
      GATEHOUSE_GATEWAY_KEY: options.key,
      GATEWAY_ID: options.id,
      GATEWAY_PORT: "0",
      HOST: "127.0.0.1",
      GATEWAY_CACHE: cache,
      LOG_LEVEL: "warn",
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const addresses = await new Promise<{ gateway_url: string; gateway_admin_url: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway ${options.id} did not start:\n${out}`)), 30_000);
    const poll = setInterval(() => {
      const line = out.split("\n").find((l) => l.startsWith('{"gateway_url"'));
      if (line) {
        clearInterval(poll);
        clearTimeout(timer);
        resolve(JSON.parse(line) as { gateway_url: string; gateway_admin_url: string });
      }
    }, 20);
    void exited.then(() => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`gateway ${options.id} exited:\n${out}`));
    });
  });
  const gateway: GatewayProcess = {
    id: options.id,
    url: addresses.gateway_url,
    adminUrl: addresses.gateway_admin_url,
    cache,
    child,
    output: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
  return gateway;
}
