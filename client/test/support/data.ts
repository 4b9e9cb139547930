/**
 * A result's fields as plain data, for `toEqual`: `has()` and `entitlement()` are methods of a result
 * (not enumerable), so its type carries them but a literal to compare with does not.
 */
export const data = (result: object): unknown => ({ ...result })
