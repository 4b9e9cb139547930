// The fake signing server of the tests, alone in its own process (so the benchmark's CPU figures are
// the client's only). Prints `{url, publicKey}` on its first line.
import { startFakeServer } from '../test/support/fake-server'

const fake = startFakeServer()
console.log(JSON.stringify({ url: fake.url, publicKey: fake.publicKeyRaw }))
// The benchmark sends thousands of requests: do not keep them.
setInterval(() => (fake.requests.length = 0), 1000)
