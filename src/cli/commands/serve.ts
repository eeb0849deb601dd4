import { type CommandGroup, examples, helpGroups } from "../program.js";
import { formatCredentials } from "./init.js";

/** `gatehouse serve`: what `npm start` runs. */
export const registerServe: CommandGroup = (program, cli) => {
  const serve = program
    .command("serve")
    .helpGroup(helpGroups.operator)
    .description("start the platform API, gRPC, the sample plant API and the embedded gateway (what npm start runs)")
    .addHelpText(
      "after",
      "\nOn the first start of an empty store, prints the first credentials once (as init does).\n" +
        "Addresses and storage come from PORT, HOST, PUBLIC_URL, GRPC_PORT, SAMPLE_PORT, DATABASE_URL\n" +
        "and GATEHOUSE_DATA_DIR (see docs/configuration.md). The embedded gateway serves the first organisation's\n" +
        "configuration on GATEWAY_PORT (default 8000, admin port +1; GATEWAY_PORT=off disables it).\n" +
        "SIGTERM or SIGINT drains requests in flight and stops.\n" +
        "With --json: one line {platform_url, grpc_url, sample_url, gateway_url?, gateway_admin_url?, gateway_tls_url?[, credentials]} once listening.",
    )
    .action(async () => {
      const [{ createApp }, { loadConfig }, { startEmbeddedGateway }, { createTracing }, { readTracingSettings }, { DomainError }] =
        await Promise.all([
          import("../../app.js"),
          import("../../config.js"),
          import("../../gateway/embedded-gateway.js"),
          import("../../tracing/create-tracing.js"),
          import("../../tracing/tracing-settings.js"),
          import("../../domain/errors.js"),
        ]);
      const config = loadConfig();
      // Read here, not with the rest of the configuration: operator commands export nothing, and an
      // OTEL_* variable meant for another program must not stop them.
      const problems: { field: string; description: string }[] = [];
      const tracingSettings = readTracingSettings(process.env, problems);
      const [problem] = problems;
      if (problem !== undefined) {
        const message = problems.length === 1 ? `${problem.field} ${problem.description}` : "invalid configuration";
        throw new DomainError("invalid_argument", "invalid_configuration", message, problems);
      }
      // The platform's RPC spans; the embedded gateway has its own, as "gatehouse-gateway" (docs/gateway.md, "Tracing").
      const tracing = await createTracing(tracingSettings, "gatehouse");
      let app: Awaited<ReturnType<typeof createApp>>;
      try {
        app = await createApp({ config, traceRpc: tracing.rpc });
      } catch (error) {
        await tracing.shutdown();
        throw error;
      }
      let gateway: Awaited<ReturnType<typeof startEmbeddedGateway>>;
      try {
        const credentials = await app.initialize();
        // The first credentials come first, before any request can be served and logged.
        if (credentials && !cli.out.json) cli.out.write(formatCredentials(credentials));
        const listening = await app.listen();
        gateway = await startEmbeddedGateway(app, listening.url, tracingSettings);
        app.logger.info({ ...listening }, "gatehouse listening");
        if (cli.out.json) {
          cli.out.write(
            `${JSON.stringify({
              platform_url: listening.url,
              grpc_url: listening.grpcUrl,
              sample_url: listening.sampleUrl,
              ...(gateway ? { gateway_url: gateway.addresses.url, gateway_admin_url: gateway.addresses.adminUrl } : {}),
              ...(gateway?.addresses.tlsUrl !== undefined ? { gateway_tls_url: gateway.addresses.tlsUrl } : {}),
              ...(credentials ? { credentials } : {}),
            })}\n`,
          );
        } else {
          cli.out.write(
            `Gatehouse platform API  ${listening.url}\n          gRPC (h2c)    ${listening.grpcUrl}\n          plant API     ${listening.sampleUrl}\n` +
              (gateway ? `          gateway       ${gateway.addresses.url} (admin ${gateway.addresses.adminUrl})\n` : "") +
              (gateway?.addresses.tlsUrl !== undefined ? `          gateway TLS   ${gateway.addresses.tlsUrl}\n` : ""),
          );
        }
        await new Promise<void>((resolve) => {
          const stop = (signal: string) => {
            app.logger.info({ signal }, "shutting down");
            resolve();
          };
          process.once("SIGTERM", () => stop("SIGTERM"));
          process.once("SIGINT", () => stop("SIGINT"));
        });
      } finally {
        await gateway?.close();
        await app.close();
        await tracing.shutdown();
      }
    });
  examples(serve, ["gatehouse serve", "PORT=9000 PUBLIC_URL=https://auth.example.com gatehouse serve", "gatehouse serve --json"]);
};
