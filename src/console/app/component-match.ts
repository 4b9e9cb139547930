// The machine-identity rule (`component_match`) in the console's words, for the policy and key forms
// and the key page (docs/integrating.md, "Identifying machines", "Which rule for which machines").
import { COMPONENT_MATCH, type ComponentMatch } from '../../core/component-match'
import { html } from './ui'

export { COMPONENT_MATCH, type ComponentMatch }

const WORDS: Record<ComponentMatch, string> = {
  off: 'Off: the fingerprint alone decides',
  any: 'Any: one part in common',
  two: 'Two: two parts in common',
  most: 'Most: more than half of the parts',
  all: 'All: every part, unchanged',
}

export const ruleInWords = (rule: ComponentMatch | null | undefined) => WORDS[rule ?? 'off'] ?? String(rule)

/** The one sentence on which rule fits what, under the field. */
export const RULE_HINT =
  'Most fits desktops and laptops (a reinstall keeps its seat, a copy does not); all fits VMs cloned with their machine id (any change is then refused too); off fits CI runners and containers, which send KEYWARD_MACHINE_ID.'

/** A select of the five rules, each in words. */
export function RuleSelect({ id, value, onChange, disabled }: { id: string; value: ComponentMatch; onChange: (v: ComponentMatch) => void; disabled?: boolean }) {
  return html`<select id=${id} value=${value} disabled=${disabled} aria-describedby=${id + '-hint'}
    onChange=${(e: Event) => onChange((e.target as HTMLSelectElement).value as ComponentMatch)}>
    ${COMPONENT_MATCH.map((r) => html`<option value=${r}>${WORDS[r]}</option>`)}
  </select>`
}
