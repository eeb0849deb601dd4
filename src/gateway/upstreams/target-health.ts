import type { Dispatcher } from "undici";

/** Active checks of one target (docs/gateway.md, "Upstreams"): each gateway probes each target itself. */
export interface ActiveCheck {
  readonly path: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly healthyAfter: number;
  readonly unhealthyAfter: number;
}

/** Passive checks, the circuit breaker: failures of live requests take a target out. */
export interface PassiveCheck {
  readonly unhealthyAfter: number;
  readonly recoverAfterMs: number;
}

export type HealthChange = (health: TargetHealth, healthy: boolean, reason: string) => void;

/**
 * What one gateway knows of one target of one upstream: requests in flight,
 * the verdict of its active probes, and its circuit breaker. It outlives
 * configuration revisions for as long as the target stays in its upstream
 * (docs/gateway.md: "health survives configuration changes").
 *
 * The breaker: `unhealthyAfter` consecutive failures (refused, reset, timed
 * out, or a 5xx) open it; after `recoverAfterMs` one request is let through
 * (half-open); its success closes the breaker, its failure opens it again.
 */
export class TargetHealth {
  /** Requests being answered by this target (least-requests balancing). */
  inFlight = 0;
  /** The active probes' verdict (a target starts healthy). */
  activeUp = true;
  private activeStreak = 0;
  private passiveFailures = 0;
  /** Epoch ms until which the breaker is open; 0 when closed. */
  private openUntil = 0;
  /** Whether the one trial request of a half-open breaker is in flight. */
  private trial = false;
  passive: PassiveCheck | undefined;
  active: ActiveCheck | undefined;
  private timer: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(
    readonly upstream: string,
    readonly target: string,
    private readonly changed: HealthChange,
  ) {}

  /** In rotation: active probes pass and the breaker is closed, or half-open with no trial in flight yet. */
  available(now: number): boolean {
    if (!this.activeUp) return false;
    if (this.openUntil === 0) return true;
    return now >= this.openUntil && !this.trial;
  }

  /** For the gauge: in rotation as far as anything decided (a half-open breaker counts as out). */
  get healthy(): boolean {
    return this.activeUp && this.openUntil === 0;
  }

  /** How long until this target may be back in rotation, from what this gateway knows (Infinity for a drained one). */
  retryAfterMs(now: number): number {
    if (!this.activeUp) return this.active?.intervalMs ?? 5_000;
    if (this.openUntil !== 0) return Math.max(0, this.openUntil - now);
    return 0;
  }

  /** A live request is sent to this target at `now`. */
  picked(now: number): void {
    this.inFlight++;
    if (this.openUntil !== 0 && now >= this.openUntil) this.trial = true;
  }

  /** A live request ended for a reason that is not the target's (its client cancelled, its body was refused): it counts neither way. */
  released(): void {
    this.inFlight--;
  }

  /** A live request to this target ended: `ok` false for a refusal, reset, timeout or 5xx. */
  finished(ok: boolean, now: number): void {
    this.inFlight--;
    if (ok) {
      this.passiveFailures = 0;
      if (this.openUntil !== 0 && this.trial) {
        this.openUntil = 0;
        this.trial = false;
        this.report("the trial request succeeded");
      }
      return;
    }
    const passive = this.passive;
    if (passive === undefined) return;
    if (this.trial) {
      this.trial = false;
      this.openUntil = now + passive.recoverAfterMs;
      return;
    }
    this.passiveFailures++;
    if (this.openUntil === 0 && this.passiveFailures >= passive.unhealthyAfter) {
      this.openUntil = now + passive.recoverAfterMs;
      this.report(`${this.passiveFailures} live requests failed in a row`);
    }
  }

  /** Sets the checks of the current revision; the active probe restarts only when its settings changed. */
  configure(active: ActiveCheck | undefined, passive: PassiveCheck | undefined, dispatcher: Dispatcher): void {
    this.passive = passive;
    if (passive === undefined && this.openUntil !== 0) {
      this.openUntil = 0;
      this.trial = false;
      this.report("passive checks were turned off");
    }
    if (sameActive(this.active, active) && (this.timer !== undefined || active === undefined)) {
      this.dispatcher = dispatcher;
      return;
    }
    this.stop();
    this.active = active;
    this.dispatcher = dispatcher;
    this.activeStreak = 0;
    if (active === undefined) {
      if (!this.activeUp) {
        this.activeUp = true;
        this.report("active checks were turned off");
      }
      return;
    }
    this.timer = setInterval(() => void this.probe(), active.intervalMs);
    this.timer.unref();
    void this.probe();
  }

  private dispatcher: Dispatcher | undefined;

  /** One active probe: `GET path`, 2xx or 3xx within the timeout is a success. */
  private async probe(): Promise<void> {
    const active = this.active;
    const dispatcher = this.dispatcher;
    if (active === undefined || dispatcher === undefined || this.probing) return;
    this.probing = true;
    let ok = false;
    try {
      const answer = await dispatcher.request({
        method: "GET",
        path: active.path,
        headers: { "user-agent": "gatehouse-health-check", via: "1.1 gatehouse" },
        headersTimeout: active.timeoutMs,
        bodyTimeout: active.timeoutMs,
        signal: AbortSignal.timeout(active.timeoutMs),
      });
      await answer.body.dump();
      ok = answer.statusCode >= 200 && answer.statusCode < 400;
    } catch {
      ok = false;
    } finally {
      this.probing = false;
    }
    if (this.active !== active) return; // reconfigured meanwhile
    if (ok === this.activeUp) {
      this.activeStreak = 0;
      return;
    }
    this.activeStreak++;
    const needed = ok ? active.healthyAfter : active.unhealthyAfter;
    if (this.activeStreak >= needed) {
      this.activeUp = ok;
      this.activeStreak = 0;
      this.report(ok ? `${needed} active checks passed` : `${needed} active checks failed`);
    }
  }

  /** Stops the active probe (the target left its upstream, or the gateway is closing). */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private report(reason: string): void {
    this.changed(this, this.healthy, reason);
  }
}

function sameActive(a: ActiveCheck | undefined, b: ActiveCheck | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.path === b.path &&
    a.intervalMs === b.intervalMs &&
    a.timeoutMs === b.timeoutMs &&
    a.healthyAfter === b.healthyAfter &&
    a.unhealthyAfter === b.unhealthyAfter
  );
}
