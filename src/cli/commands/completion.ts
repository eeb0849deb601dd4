import { Argument } from "commander";
import { bashCompletion, zshCompletion } from "../completion-script.js";
import { type CommandGroup, examples } from "../program.js";

/** `gatehouse completion bash|zsh`: a completion script generated from the command tree. */
export const registerCompletion: CommandGroup = (program, cli) => {
  const completion = program
    .command("completion")
    .description("print a shell completion script (bash or zsh)")
    .addArgument(new Argument("<shell>", "the shell").choices(["bash", "zsh"]))
    .addHelpText("after", '\nThe script is generated from the commands and options of this version. With --json: {"shell", "script"}.')
    .action((shell: "bash" | "zsh") => {
      // The program is the root of the tree this command belongs to.
      const script = shell === "bash" ? bashCompletion(program) : zshCompletion(program);
      cli.out.result({ shell, script }, () => script);
    });
  examples(completion, [
    "source <(gatehouse completion bash)",
    "gatehouse completion bash > ~/.local/share/bash-completion/completions/gatehouse",
    `gatehouse completion zsh > "\${fpath[1]}/_gatehouse"`,
  ]);
};
