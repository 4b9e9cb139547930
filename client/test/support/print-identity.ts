// Prints machineIdentity() as JSON, for the tests that compare separate processes (and namespaces).
// Argument: the product id (salt).
import { machineIdentity } from '../../src/machine-identity.ts'

console.log(JSON.stringify(await machineIdentity({ productId: process.argv[2] ?? 'prod_test' })))
