import type { CommandGroup } from "../program.js";
import { registerCompletion } from "./completion.js";
import { registerGateway } from "./gateway.js";
import { registerConsumers } from "./consumers.js";
import { registerInit } from "./init.js";
import { registerKeys } from "./keys.js";
import { registerMasterKey } from "./master-key.js";
import { registerOperators } from "./operators.js";
import { registerOrgs } from "./orgs.js";
import { registerRun } from "./run.js";
import { registerSecrets } from "./secrets.js";
import { registerServe } from "./serve.js";
import { registerSessions } from "./sessions.js";
import { registerSettings } from "./settings.js";
import { registerSigningKey } from "./signing-key.js";
import { registerWebhooks } from "./webhooks.js";

/**
 * Every command group, in the order help lists them. A new group is one file
 * in this folder (a CommandGroup) and one line here.
 */
export const commandGroups: readonly CommandGroup[] = [
  registerServe,
  registerGateway,
  registerInit,
  registerOrgs,
  registerKeys,
  registerOperators,
  registerConsumers,
  registerSessions,
  registerSettings,
  registerSigningKey,
  registerMasterKey,
  registerSecrets,
  registerWebhooks,
  registerRun,
  registerCompletion,
];
