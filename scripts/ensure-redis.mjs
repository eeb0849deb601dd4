// Makes sure Debian's redis-server is installed: the tests of cluster-wide rate limits start
// their own on a free port (test/support/redis.ts), whatever else runs on the machine.
//
//   node scripts/ensure-redis.mjs        installs it when missing (as root)
import { fileURLToPath } from "node:url";
import { ensureDebianPackage } from "./debian-package.mjs";

export const redisServerPath = process.env.REDIS_SERVER_PATH ?? "/usr/bin/redis-server";

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    ensureDebianPackage(redisServerPath, "redis-server");
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}
