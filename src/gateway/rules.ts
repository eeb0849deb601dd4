import { Code } from "@connectrpc/connect";
import { BlockList, isIPv4 } from "node:net";
import type { RuleResource } from "../domain/config/config-document.js";
import { isForwardingHeader } from "../domain/config/forwarding-headers.js";
import { readRequestPath } from "../domain/config/request-path.js";
import { compileRuleRegex, type RuleRegexMatcher } from "../domain/config/rule-regex.js";
import { answers, gatewayAnswer, type GatewayAnswer } from "./gateway-answer.js";
import type { Exchange } from "./gateway-handler.js";
import type { Step } from "./plugins/plugin.js";

export type CompiledRule =
  | {
      readonly name: string;
      readonly kind: "header";
      readonly header: string;
      readonly regex: RuleRegexMatcher;
      readonly denied: GatewayAnswer;
    }
  | { readonly name: string; readonly kind: "path"; readonly prefix: string; readonly denied: GatewayAnswer }
  | { readonly name: string; readonly kind: "ip"; readonly blocks: BlockList; readonly denied: GatewayAnswer };

/** A rule ready to match, or why this gateway cannot evaluate it (its routes then answer 503). */
export function compileRule(rule: RuleResource): CompiledRule | { problem: string } {
  const denied = gatewayAnswer(Code.PermissionDenied, "denied_by_rule", `the request is refused by rule ${rule.name}`);
  const match = rule.match;
  if ("header" in match) {
    // The module validation uses: what an import accepted is exactly what matches here (a stored
    // document from before a rule became stricter answers 503 on its routes rather than guessing).
    const compiled = compileRuleRegex(match.regex, { ignoreCase: match.ignore_case === true });
    if (!compiled.ok) return { problem: compiled.problem };
    return { name: rule.name, kind: "header", header: match.header.toLowerCase(), regex: compiled.matcher, denied };
  }
  if ("path_prefix" in match) {
    const prefix = readRequestPath(match.path_prefix)?.match;
    if (prefix === undefined) return { problem: "the path prefix cannot be matched" };
    return { name: rule.name, kind: "path", prefix, denied };
  }
  const [address = "", bits = "0"] = match.ip_cidr.split("/");
  const blocks = new BlockList();
  try {
    blocks.addSubnet(address, Number(bits), isIPv4(address) ? "ipv4" : "ipv6");
  } catch {
    return { problem: "the CIDR block cannot be read" };
  }
  return { name: rule.name, kind: "ip", blocks, denied };
}

/**
 * The value a header rule judges: the header as the upstream will receive it
 * from the client (proxy/upstream-headers.ts: a name with `_` or a forged
 * forwarding header never goes), the gateway's own X-Forwarded-* values, and
 * for `host` the authority the request is routed by (its Host, or an
 * absolute-form target's).
 */
function headerValue(exchange: Exchange, name: string): string | string[] | undefined {
  if (name === "host") return exchange.authority;
  const client = exchange.clientView()[name];
  if (client !== undefined || !isForwardingHeader(name) || exchange.trustedPeer()) return client;
  if (name === "x-forwarded-for") return exchange.peer;
  if (name === "x-forwarded-proto") return "http";
  if (name === "x-forwarded-host") return exchange.authority;
  return undefined;
}

function ruleMatches(rule: CompiledRule, exchange: Exchange, path: string): boolean {
  switch (rule.kind) {
    case "path":
      return path.startsWith(rule.prefix);
    case "ip": {
      const peer = exchange.peer;
      return peer !== "" && rule.blocks.check(peer, peer.includes(":") ? "ipv6" : "ipv4");
    }
    case "header": {
      // A header the request does not carry matches no pattern.
      const value = headerValue(exchange, rule.header);
      if (value === undefined) return false;
      return rule.regex.test(Array.isArray(value) ? value.join(", ") : value);
    }
  }
}

/**
 * The route's rules, after CORS and before credentials: any matching `deny`
 * refuses with 403 naming it; if the route lists `allow` rules, one must
 * match, on the path as matched and, for a path holding `;` or `%2F`, as
 * read literally too (request-path.ts), so that neither widens an allow-list.
 * `ip_cidr` matches the TCP peer address.
 */
export function rulesStep(deny: readonly CompiledRule[], allow: readonly CompiledRule[]): Step {
  return {
    kind: "rules",
    run(exchange: Exchange): boolean {
      const path = exchange.path;
      for (const rule of deny) {
        if (ruleMatches(rule, exchange, path)) {
          exchange.answer(rule.denied);
          return false;
        }
      }
      if (allow.length === 0) return true;
      const literal = exchange.literalPath;
      for (const rule of allow) {
        if (ruleMatches(rule, exchange, path) && (literal === path || ruleMatches(rule, exchange, literal))) return true;
      }
      exchange.answer(answers.noAllowRule);
      return false;
    },
  };
}
