/** The time seam: production uses the system clock, tests inject their own. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
