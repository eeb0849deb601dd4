import { UsageError } from "../errors.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { runWithEnvironment } from "../secrets-run.js";
import { pullSelection, type Selection, withSelection } from "./secrets.js";

/**
 * `gatehouse run`: like `doppler run` and `infisical run`, the command inherits
 * our environment plus the secrets (a secret wins over a variable of the same
 * name), except GATEHOUSE_API_KEY, so the command does not receive the admin
 * key it never asked for. Exits with the command's code.
 */
export const registerRun: CommandGroup = (program, cli) => {
  const run = withSelection(
    program
      .command("run")
      .helpGroup(helpGroups.api)
      .description("run a command with secrets in its environment (through the public API)")
      .argument("[command...]", "the command and its arguments, after --"),
  )
    .addHelpText(
      "after",
      "\nExits with the command's exit code (128 + the signal number if a signal ended it; 127 if it\n" +
        "cannot be found, 126 if it cannot be run). SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR2 are\n" +
        "passed on to it. An environment with no secrets (a typo) is an error unless --allow-empty.\n" +
        "Set GATEHOUSE_URL, GATEHOUSE_API_KEY (admin) and GATEHOUSE_ORG, as for gatehouse secrets.",
    )
    .action(async (commandLine: string[], options: Selection) => {
      const dashDash = cli.argv.indexOf("--");
      if (dashDash === -1 && commandLine.length > 0) {
        throw new UsageError(
          `put the command after --: gatehouse run --env ${options.env} -- ${commandLine.join(" ")}`,
          "missing_separator",
        );
      }
      const [command, ...args] = commandLine;
      if (!command)
        throw new UsageError("run needs the command after --, e.g. gatehouse run --env production -- node server.js", "missing_argument");
      const secrets = await pullSelection(cli.out, options);
      const env: NodeJS.ProcessEnv = { ...process.env };
      delete env.GATEHOUSE_API_KEY;
      for (const secret of secrets) env[secret.name] = secret.value;
      cli.exitWith(
        await runWithEnvironment(command, args, env, (code, message) =>
          cli.out.error({ code, message, violations: [], exitCode: 127, usage: false }),
        ),
      );
    });
  examples(run, ["gatehouse run --env production -- node server.js", "gatehouse run --env staging --tag web -- npm start"]);
};
