/** What `p` rejected with; fails the test when it resolves instead. */
export async function rejection(p: Promise<unknown>): Promise<any> {
  try {
    await p
  } catch (err) {
    return err
  }
  throw new Error('expected a rejection, got a result')
}
