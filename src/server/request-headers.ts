import type { IncomingHttpHeaders } from "node:http";

/**
 * A fetch `Headers` view of Node's incoming headers. Most calls only ever ask
 * `get("authorization")`; building a real Headers object from every header
 * of every request cost more than the rest of a cheap call. Reads go straight
 * to Node's object; anything else (iteration, mutation by an interceptor)
 * builds the real Headers once and works on it from then on.
 */
export class RequestHeaders implements Headers {
  private full: Headers | undefined;

  constructor(private readonly raw: IncomingHttpHeaders) {}

  get(name: string): string | null {
    if (this.full) return this.full.get(name);
    const value = this.raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : value;
  }

  has(name: string): boolean {
    return this.full ? this.full.has(name) : this.raw[name.toLowerCase()] !== undefined;
  }

  getSetCookie(): string[] {
    return this.materialize().getSetCookie();
  }

  append(name: string, value: string): void {
    this.materialize().append(name, value);
  }

  set(name: string, value: string): void {
    this.materialize().set(name, value);
  }

  delete(name: string): void {
    this.materialize().delete(name);
  }

  forEach(callback: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    const bound = thisArg === undefined ? callback : callback.bind(thisArg);
    this.materialize().forEach((value, key) => {
      bound(value, key, this);
    });
  }

  entries(): HeadersIterator<[string, string]> {
    return this.materialize().entries();
  }

  keys(): HeadersIterator<string> {
    return this.materialize().keys();
  }

  values(): HeadersIterator<string> {
    return this.materialize().values();
  }

  [Symbol.iterator](): HeadersIterator<[string, string]> {
    return this.materialize()[Symbol.iterator]();
  }

  private materialize(): Headers {
    if (!this.full) {
      const headers = new Headers();
      for (const [name, value] of Object.entries(this.raw)) {
        // HTTP/2 pseudo-headers (":path") are not headers.
        if (value === undefined || name.charCodeAt(0) === 0x3a) continue;
        if (Array.isArray(value)) for (const v of value) headers.append(name, v);
        else headers.set(name, value);
      }
      this.full = headers;
    }
    return this.full;
  }
}
