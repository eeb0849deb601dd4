import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

/**
 * A Gatehouse server in a process of its own (`gatehouse serve`, the built
 * dist/), for what an in-process server cannot show: a kill -9, or a second
 * instance that shares nothing with the test but the database.
 */
export interface ServerProcess {
  url: string;
  /** The gRPC (h2c) listener. */
  grpcUrl: string;
  child: ChildProcess;
  /** What `serve` printed on first start (absent when the store was initialised before). */
  credentials?: { organizationId: string; apiKey: string };
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL (kill -9) and wait for the exit. */
  kill(): Promise<void>;
}

const root = process.cwd();
export const gatehouseBin = join(root, "bin", "gatehouse.js");

/** True when dist/ holds a build (`npm test` builds it first; so does `npx tsc -p tsconfig.build.json`). */
export function isBuilt(): boolean {
  return existsSync(join(root, "dist", "src", "cli", "main.js"));
}

export async function spawnServer(
  env: { DATABASE_URL: string; GATEHOUSE_DATA_DIR: string } & Record<string, string>,
): Promise<ServerProcess> {
  if (!isBuilt()) throw new Error("dist/ is not built: run `npx tsc -p tsconfig.build.json` (npm test does it)");
  const child = spawn(process.execPath, [gatehouseBin, "serve"], {
    env: { ...process.env, PORT: "0", GRPC_PORT: "0", SAMPLE_PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "warn", GATEWAY_PORT: "off", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${stdout}\n${stderr}`)), 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /Gatehouse platform API\s+(http:\/\/\S+)/.exec(stdout);
      if (match?.[1] && /gRPC \(h2c\)\s+http/.test(stdout)) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${stdout}\n${stderr}`));
    });
  });
  const organizationId = /organization_id\s+(\S+)/.exec(stdout)?.[1];
  const apiKey = /api_key \(admin\)\s+(gk_\S+)/.exec(stdout)?.[1];
  return {
    url,
    grpcUrl: /gRPC \(h2c\)\s+(http:\/\/\S+)/.exec(stdout)?.[1] ?? "",
    child,
    ...(organizationId && apiKey ? { credentials: { organizationId, apiKey } } : {}),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
