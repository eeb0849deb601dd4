/** Where a queued item comes from: its organisation and, within it, its client. */
export interface FairKey {
  organization: string;
  client: string;
}

export interface FairQueueLimits {
  /** Items the whole queue holds at most. */
  total: number;
  /** Items one (organisation, client) holds at most. */
  perClient: number;
}

/** What offer did: refused the item, or took it (and maybe pushed out another sender's newest item to make room). */
export type Offered<T> = { admitted: false } | { admitted: true; evicted: T | null };

interface ClientLine<T> {
  key: string;
  items: T[];
  /** When its newest item arrived (a sequence number). */
  newest: number;
}

interface OrganizationLine<T> {
  key: string;
  clients: Ring<ClientLine<T>>;
  byClient: Map<string, ClientLine<T>>;
  size: number;
  /** When its newest item arrived (a sequence number). */
  newest: number;
}

/** A round: members served in turn from `next`; a newcomer joins at the end of the current round. */
class Ring<M> {
  readonly members: M[] = [];
  /** Index of the member served next (0 when empty). */
  next = 0;

  get current(): M | undefined {
    return this.members[this.next];
  }

  join(member: M): void {
    // Inserted just before the one served next: it is served last in this round.
    this.members.splice(this.next, 0, member);
    if (this.members.length > 1) this.next++;
  }

  /** After serving the current member. */
  advance(): void {
    this.next = this.members.length === 0 ? 0 : (this.next + 1) % this.members.length;
  }

  remove(member: M): void {
    const index = this.members.indexOf(member);
    if (index === -1) return;
    this.members.splice(index, 1);
    // Whoever followed the removed member moves into its place.
    if (index < this.next) this.next--;
    if (this.next >= this.members.length) this.next = 0;
  }
}

/**
 * A bounded queue served fairly: round-robin over organisations, and within an
 * organisation round-robin over its clients, so one item of every sender is
 * served before a second of any. A sender's items keep their order.
 *
 * Admission: a client may hold `perClient` items. When the queue is full, an
 * item is still taken if its sender holds clearly less than the heaviest one
 * (longest-queue drop, as fair-queueing routers do): the heaviest
 * organisation (or, in the arriving item's own organisation, its heaviest
 * client) gives up its newest item, which has waited least. So a flood, from
 * one address or from many addresses of one organisation, fills the queue
 * but cannot keep anyone else out of it.
 */
export class FairQueue<T> {
  private readonly organizations = new Ring<OrganizationLine<T>>();
  private readonly byOrganization = new Map<string, OrganizationLine<T>>();
  private count = 0;
  private arrivals = 0;

  get size(): number {
    return this.count;
  }

  offer(item: T, key: FairKey, limits: FairQueueLimits): Offered<T> {
    const organization = this.byOrganization.get(key.organization);
    const clientSize = organization?.byClient.get(key.client)?.items.length ?? 0;
    if (clientSize >= limits.perClient) return { admitted: false };
    let evicted: T | null = null;
    if (this.count >= limits.total) {
      const victim = this.victimFor(organization, clientSize);
      if (!victim) return { admitted: false };
      evicted = victim.client.items.pop() as T;
      this.removed(victim.organization, victim.client);
    }
    this.push(item, key);
    return { admitted: true, evicted };
  }

  /**
   * The next item, round-robin over organisations and their clients; with
   * `eligible`, senders it refuses are passed over (keeping their turn).
   */
  take(eligible?: (key: FairKey) => boolean): T | undefined {
    const organizations = this.organizations.members;
    for (let i = 0; i < organizations.length; i++) {
      const orgIndex = (this.organizations.next + i) % organizations.length;
      const organization = organizations[orgIndex] as OrganizationLine<T>;
      const clients = organization.clients.members;
      for (let j = 0; j < clients.length; j++) {
        const clientIndex = (organization.clients.next + j) % clients.length;
        const client = clients[clientIndex] as ClientLine<T>;
        if (eligible && !eligible({ organization: organization.key, client: client.key })) continue;
        const item = client.items.shift() as T;
        organization.clients.next = clientIndex;
        organization.clients.advance();
        this.organizations.next = orgIndex;
        this.organizations.advance();
        this.removed(organization, client);
        return item;
      }
    }
    return undefined;
  }

  /** Bookkeeping after an item of `client` left: drops lines that became empty. */
  private removed(organization: OrganizationLine<T>, client: ClientLine<T>): void {
    organization.size--;
    this.count--;
    if (client.items.length === 0) {
      organization.clients.remove(client);
      organization.byClient.delete(client.key);
    }
    if (organization.size === 0) {
      this.organizations.remove(organization);
      this.byOrganization.delete(organization.key);
    }
  }

  private push(item: T, key: FairKey): void {
    let organization = this.byOrganization.get(key.organization);
    if (!organization) {
      organization = { key: key.organization, clients: new Ring(), byClient: new Map(), size: 0, newest: 0 };
      this.byOrganization.set(key.organization, organization);
      this.organizations.join(organization);
    }
    let client = organization.byClient.get(key.client);
    if (!client) {
      client = { key: key.client, items: [], newest: 0 };
      organization.byClient.set(key.client, client);
      organization.clients.join(client);
    }
    client.items.push(item);
    client.newest = ++this.arrivals;
    organization.newest = client.newest;
    organization.size++;
    this.count++;
  }

  /** Whose newest item makes room for an item of `organization` (a client holding `clientSize`), if anyone's. */
  private victimFor(
    organization: OrganizationLine<T> | undefined,
    clientSize: number,
  ): { organization: OrganizationLine<T>; client: ClientLine<T> } | null {
    let heaviest: OrganizationLine<T> | undefined;
    for (const candidate of this.organizations.members) {
      // Of equals, the one whose newest item arrived last.
      if (!heaviest || candidate.size > heaviest.size || (candidate.size === heaviest.size && candidate.newest > heaviest.newest))
        heaviest = candidate;
    }
    if (!heaviest) return null;
    const client = heaviestClient(heaviest);
    if (heaviest !== organization) {
      // Only when it is strictly fairer afterwards: the heaviest still holds at least as much as the newcomer's organisation.
      return heaviest.size > (organization?.size ?? 0) + 1 ? { organization: heaviest, client } : null;
    }
    return client.items.length > clientSize + 1 ? { organization: heaviest, client } : null;
  }
}

/** The client holding most; of equals, the one whose newest item arrived last (it has waited least). */
function heaviestClient<T>(organization: OrganizationLine<T>): ClientLine<T> {
  let heaviest = organization.clients.members[0] as ClientLine<T>;
  for (const client of organization.clients.members) {
    const more = client.items.length - heaviest.items.length;
    if (more > 0 || (more === 0 && client.newest > heaviest.newest)) heaviest = client;
  }
  return heaviest;
}
