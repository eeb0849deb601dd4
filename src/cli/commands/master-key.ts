import { InvalidArgumentError } from "commander";
import type { MasterKeyStatus } from "../../domain/master-key/master-key-status.js";
import { formatTable } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";

const kindLabels: Record<string, string> = {
  secret_keyring: "sealing+data keys",
  previous_sealing_key: "previous sealing keys",
  session_signing_key: "session signing keys",
  legacy_signing_key: "legacy signing keys",
  system_value: "system values",
  webhook_endpoint: "webhook secrets",
};

/** The status as `--json` prints it. */
function statusJson(status: MasterKeyStatus) {
  return {
    current: status.currentId,
    keys: status.keys.map((key) => ({
      master_key_id: key.masterKeyId,
      state: key.state,
      values: key.values,
      by_kind: key.byKind,
    })),
  };
}

function formatStatus(status: MasterKeyStatus): string {
  return formatTable(
    ["MASTER_KEY", "STATE", "VALUES", "WHAT"],
    status.keys.map((key) => [
      key.masterKeyId ?? "(none recorded)",
      key.state,
      String(key.values),
      Object.entries(key.byKind)
        .map(([kind, n]) => `${n} ${kindLabels[kind] ?? kind}`)
        .join(", "),
    ]),
  );
}

const batchSize = (raw: string) => {
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < 1 || value > 10_000) throw new InvalidArgumentError("a whole number of rows from 1 to 10000");
  return value;
};

const keysHelp =
  "\nThe master keys come from GATEHOUSE_MASTER_KEY (current) and GATEHOUSE_PREVIOUS_MASTER_KEYS (being retired,\n" +
  "comma-separated), else from the data directory: master.key (current) and master.key.previous (one key a line).\n" +
  'See docs/secrets.md, "Rotating the master key".';

/**
 * `gatehouse master-key status|rotate|generate`: the master key that wraps every
 * private key and data key at rest, rotated headless and online.
 */
export const registerMasterKey: CommandGroup = (program, cli) => {
  const group = program
    .command("master-key")
    .helpGroup(helpGroups.operator)
    .description("rotate the master key that wraps the private keys and data keys at rest")
    .addHelpText("after", keysHelp);

  const status = group
    .command("status")
    .description("how many wrapped values each master key holds (current, previous, unknown to this process)")
    .addHelpText(
      "after",
      '\nA previous key that wraps 0 values can be removed. With --json:\n{"current", "keys": [{"master_key_id", "state", "values", "by_kind"}]}.',
    )
    .action(async () => {
      const { withStore } = await import("../with-app.js");
      const out = await withStore(cli.out, "counting wrapped values", async (store) =>
        (await import("../../composition/master-key.js")).masterKeyStatusOf(store),
      );
      cli.out.result(statusJson(out), () => formatStatus(out));
    });
  examples(status, ["gatehouse master-key status", "gatehouse master-key status --json"]);

  const rotate = group
    .command("rotate")
    .description("wrap every private key and data key again under the current master key, in batches, while servers serve")
    .option("--batch-size <rows>", "rows per batch (transaction), 1 to 10000 (default 100)", batchSize, 100)
    .addHelpText(
      "after",
      "\nFirst give every instance the new key as current and the old one as previous, and restart them; then run\n" +
        "this. It refuses to start when a value is under a key it was not given. It can be stopped (even killed) and\n" +
        "run again: it goes on with what is left. Afterwards the previous keys wrap nothing and can be removed.\n" +
        'With --json: {"current", "rewrapped", "changed_meanwhile", "remaining", "retirable"}.',
    )
    .action(async (options: { batchSize: number }) => {
      const { withStore } = await import("../with-app.js");
      const meter = cli.out.meter();
      const started = Date.now();
      const done = await withStore(cli.out, "rotating the master key", async (store) => {
        const { rotateMasterKeyOf } = await import("../../composition/master-key.js");
        return rotateMasterKeyOf(store, {
          batchSize: options.batchSize,
          onProgress: ({ done, total }) => {
            const seconds = (Date.now() - started) / 1000;
            meter.update(
              `wrapping again under the current master key: ${done} of ${total} values (${total ? Math.floor((done * 100) / total) : 100}%, ` +
                `${seconds > 0 ? Math.round(done / seconds) : 0}/s)`,
            );
          },
        });
      }).finally(() => meter.done());
      if (done.remaining > 0) {
        const { CliError } = await import("../errors.js");
        throw new CliError(
          "master_key_rotation_incomplete",
          `${done.remaining} values are still under an old master key after three passes: an instance is still writing with an old key as ` +
            "its current one. Give every instance the new key as GATEHOUSE_MASTER_KEY, restart it, and run the command again",
        );
      }
      const out = {
        current: done.currentId,
        rewrapped: done.rewrapped,
        changed_meanwhile: done.changedMeanwhile,
        remaining: done.remaining,
        retirable: done.retirable,
      };
      cli.out.result(out, () =>
        [
          `every wrapped value is under master key ${out.current} (${out.rewrapped} wrapped again${
            out.changed_meanwhile ? `, ${out.changed_meanwhile} written meanwhile by servers` : ""
          })`,
          ...(out.retirable.length > 0
            ? [`these keys wrap nothing any more and can be removed: ${out.retirable.join(", ")}`]
            : ["no previous key is configured"]),
          "",
        ].join("\n"),
      );
    });
  examples(rotate, [
    "GATEHOUSE_MASTER_KEY=<new> GATEHOUSE_PREVIOUS_MASTER_KEYS=<old> gatehouse master-key rotate",
    "gatehouse master-key rotate --batch-size 1000 --json",
  ]);

  const generate = group
    .command("generate")
    .description("make a new file-based master key current; the old one moves to master.key.previous")
    .addHelpText(
      "after",
      "\nFor the default, file-based master key (no GATEHOUSE_MASTER_KEY): writes a new <data dir>/master.key\n" +
        "(mode 0600) and appends the old key to master.key.previous. Restart every instance sharing the data\n" +
        'directory, then run gatehouse master-key rotate. With --json: {"current", "previous"}.',
    )
    .action(async () => {
      const [{ loadConfig }, { introduceMasterKeyFile }] = await Promise.all([
        import("../../config.js"),
        import("../../crypto/master-keys.js"),
      ]);
      const ids = introduceMasterKeyFile(loadConfig());
      const out = { current: ids.currentId, previous: ids.previousId };
      cli.out.result(
        out,
        () =>
          `master key ${out.current} is current in the key file; ${out.previous} moved to master.key.previous\n` +
          "restart every instance, then run: gatehouse master-key rotate\n",
      );
    });
  examples(generate, [
    "gatehouse master-key generate",
    "gatehouse master-key generate && gatehouse master-key rotate   # no server running",
  ]);
};
