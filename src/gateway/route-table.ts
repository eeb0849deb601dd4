import FindMyWay from "find-my-way";

/** What the route table needs to know of a route. */
export interface RoutableRoute {
  readonly name: string;
  /** `path: /a/b` (exact) or `path: /a/b/*` (prefix). */
  readonly exact: boolean;
  /** The path in its matching form (request-path.ts), without the trailing `/*` of a prefix. */
  readonly base: string;
  /** Methods as a mask of methodIndex bits; allMethods when the route lists none. */
  readonly methodMask: number;
  /** Absent: every domain. */
  readonly domains: readonly string[] | undefined;
}

/** The methods a route may list (config-document.ts httpMethods), by bit; bit 7 stands for any other method. */
const methodNames = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
const otherMethod = 7;
export const allMethods = 0xff;

export function methodIndex(method: string): number {
  switch (method) {
    case "GET":
      return 0;
    case "HEAD":
      return 1;
    case "POST":
      return 2;
    case "PUT":
      return 3;
    case "PATCH":
      return 4;
    case "DELETE":
      return 5;
    case "OPTIONS":
      return 6;
    default:
      return otherMethod;
  }
}

export function methodMaskOf(methods: readonly string[] | undefined): number {
  if (methods === undefined) return allMethods;
  let mask = 0;
  for (const method of methods) {
    const index = methodIndex(method);
    if (index !== otherMethod) mask |= 1 << index;
  }
  return mask;
}

/** The Allow header of a 405, per mask of allowed methods (RFC 9110 section 10.2.1), built once each. */
const allowValues: string[] = [];
export function allowHeaderOf(mask: number): string {
  let value = allowValues[mask];
  if (value === undefined) {
    value = methodNames.filter((_, i) => (mask & (1 << i)) !== 0).join(", ");
    allowValues[mask] = value;
  }
  return value;
}

/**
 * What one node of the radix tree answers: the best route per method among
 * every route whose path matches there, and the methods they allow together.
 */
interface Slot<R> {
  /**
   * Set when one route is the best for every method (the usual case: the
   * best route lists no methods); then the per-method lists are absent, which
   * spares ten thousand routes twenty thousand arrays of eight (about 2 MB).
   */
  readonly every: R | undefined;
  /** Rank of `every`. */
  readonly everyRank: number;
  /** Index: methodIndex; absent when `every` is set. */
  readonly byMethod: readonly (R | undefined)[] | undefined;
  /** Rank of byMethod's route per method, for comparing with the other tree. */
  readonly rankByMethod: readonly number[] | undefined;
  readonly allowMask: number;
}

function routeIn<R>(slot: Slot<R>, method: number): R | undefined {
  return slot.every ?? slot.byMethod?.[method];
}

function rankIn<R>(slot: Slot<R>, method: number): number {
  return slot.every !== undefined ? slot.everyRank : (slot.rankByMethod?.[method] ?? 0);
}

/** How specific a path match is: exact beats every prefix, a longer prefix a shorter one. */
function rankOf(route: RoutableRoute): number {
  return route.exact ? Number.MAX_SAFE_INTEGER : route.base.length;
}

export interface RouteTable<R extends RoutableRoute> {
  /**
   * The route that serves a method on a path of a host (docs/gateway.md, "The
   * data plane: how the gateway enforces it", routing); when none does, the methods the matching routes allow (405 with
   * Allow), or 0 when no route's path matches (404).
   */
  lookup(host: string, path: string, method: number): R | number;
}

type Router = FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
const noop = () => {};

/**
 * One tree: the paths that match exactly (exact routes, and the path of each
 * prefix itself) in a hash map, the `/*` prefixes in a find-my-way radix
 * tree for the longest match. A static path is a map lookup, and the radix
 * tree only holds what needs one (find-my-way keeps about 1.5 KB per
 * registered path: ten thousand routes would hold 24 MB in it otherwise).
 */
interface Tree<R> {
  readonly exact: ReadonlyMap<string, Slot<R>>;
  readonly prefixes: Router | undefined;
}

function slotFor<R>(tree: Tree<R>, path: string): Slot<R> | undefined {
  const found = tree.exact.get(path);
  if (found !== undefined || tree.prefixes === undefined) return found;
  return tree.prefixes.find("GET", path)?.store as Slot<R> | undefined;
}

/**
 * The route table of one configuration revision: one radix tree
 * (find-my-way) for the routes of each domain, and one for the routes that
 * serve every domain. A lookup asks the host's tree and the shared one and
 * keeps the better answer, so a route listing a hundred domains is one entry
 * in each of their trees and the shared routes are never copied per domain.
 *
 * Precedence (docs/gateway.md, "The data plane: how the gateway enforces it"): exact beats prefix, a longer prefix beats a
 * shorter one, a route with `domains` beats one without, then the route name
 * in byte order; `/a/*` matches `/a` and every path under `/a/`. Every node
 * of a tree knows, per method, the best route among all those whose path
 * matches there, computed once here, so a lookup is one map lookup or one
 * walk per tree.
 */
export function createRouteTable<R extends RoutableRoute>(routes: readonly R[]): RouteTable<R> {
  const shared: R[] = [];
  const perDomain = new Map<string, R[]>();
  for (const route of routes) {
    if (route.domains === undefined) {
      shared.push(route);
      continue;
    }
    for (const domain of route.domains) {
      let list = perDomain.get(domain);
      if (!list) {
        list = [];
        perDomain.set(domain, list);
      }
      list.push(route);
    }
  }
  const sharedTree = shared.length > 0 ? buildTree(shared) : undefined;
  const domainTrees = new Map<string, Tree<R>>();
  for (const [domain, list] of perDomain) domainTrees.set(domain, buildTree(list));

  return {
    lookup(host, path, method) {
      const domainTree = domainTrees.get(host);
      const own = domainTree === undefined ? undefined : slotFor(domainTree, path);
      const any = sharedTree === undefined ? undefined : slotFor(sharedTree, path);
      if (own && any) {
        const a = routeIn(own, method);
        const b = routeIn(any, method);
        // Equal rank: the route with domains wins.
        if (a !== undefined && (b === undefined || rankIn(own, method) >= rankIn(any, method))) return a;
        if (b !== undefined) return b;
        return own.allowMask | any.allowMask;
      }
      const slot = own ?? any;
      if (!slot) return 0;
      return routeIn(slot, method) ?? slot.allowMask;
    },
  };
}

/** Routes by name in byte order (the last tie-breaker). */
function byName(a: RoutableRoute, b: RoutableRoute): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

function buildTree<R extends RoutableRoute>(routes: readonly R[]): Tree<R> {
  const exact = new Map<string, R[]>();
  const prefixes = new Map<string, R[]>();
  for (const route of routes) {
    const map = route.exact ? exact : prefixes;
    let list = map.get(route.base);
    if (!list) {
      list = [];
      map.set(route.base, list);
    }
    list.push(route);
  }
  for (const list of exact.values()) list.sort(byName);
  for (const list of prefixes.values()) list.sort(byName);

  // Prefix routes matching every path under `path` (and `path` itself), the longest prefix first.
  const prefixChain = (path: string): R[] => {
    const chain: R[] = [];
    let end = path.length;
    for (;;) {
      const base = path.slice(0, end);
      const found = prefixes.get(base);
      if (found) chain.push(...found);
      if (end === 0) break;
      end = path.lastIndexOf("/", end - 1);
      if (end < 0) break;
    }
    return chain;
  };

  const statics = new Map<string, Slot<R>>();
  for (const [path, list] of exact) statics.set(path, slotOf([...list, ...prefixChain(path)]));
  let router: Router | undefined;
  for (const base of prefixes.keys()) {
    // `/a/*` answers `/a` (unless an exact `/a` is there already) and every path under `/a/`.
    const slot = slotOf(prefixChain(base));
    if (base !== "" && !statics.has(base)) statics.set(base, slot);
    router ??= FindMyWay({ caseSensitive: true });
    // A literal ":" would start a parameter: find-my-way reads "::" as one ":".
    router.on("GET", `${base}/*`.replaceAll(":", "::"), noop, slot);
  }
  return { exact: statics, prefixes: router };
}

function slotOf<R extends RoutableRoute>(chain: readonly R[]): Slot<R> {
  const first = chain[0];
  if (first !== undefined && first.methodMask === allMethods) {
    return { every: first, everyRank: rankOf(first), byMethod: undefined, rankByMethod: undefined, allowMask: allMethods & 0x7f };
  }
  const byMethod: (R | undefined)[] = new Array(8).fill(undefined);
  const rankByMethod: number[] = new Array(8).fill(0);
  let allowMask = 0;
  for (const route of chain) {
    allowMask |= route.methodMask;
    for (let m = 0; m < 8; m++) {
      if (byMethod[m] === undefined && (route.methodMask & (1 << m)) !== 0) {
        byMethod[m] = route;
        rankByMethod[m] = rankOf(route);
      }
    }
  }
  return { every: undefined, everyRank: 0, byMethod, rankByMethod, allowMask: allowMask & 0x7f };
}
