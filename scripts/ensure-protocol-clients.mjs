// Makes sure the independent HTTP/2 and gRPC clients the protocol tests drive are installed:
// Debian's python3-h2 (hyper-h2, for HTTP/2 requests no well-behaved client would send) and
// python3-grpcio (a gRPC client nobody here wrote), both for Debian's /usr/bin/python3.
//
//   node scripts/ensure-protocol-clients.mjs        installs them when missing (as root)
import { fileURLToPath } from "node:url";
import { ensureDebianPackage } from "./debian-package.mjs";

const distPackages = "/usr/lib/python3/dist-packages";

export function ensureProtocolClients() {
  ensureDebianPackage(`${distPackages}/h2/__init__.py`, "python3-h2");
  ensureDebianPackage(`${distPackages}/grpc/__init__.py`, "python3-grpcio");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) ensureProtocolClients();
