"""An import-linter contract type for modules docs/architecture.md plans but that do not exist yet.

`forbidden_when_present` is import-linter's `forbidden` contract, except that a
source module absent from the graph is skipped with a warning instead of failing
the whole run ("Module 'gradkern.program' does not exist"): the contracts of
gradkern.program and gradkern.rules can be written now and start to bite the day
the modules land. Registered in pyproject.toml under [tool.importlinter]
contract_types; lint-imports runs from the repository root, which it puts on
sys.path, so this module imports as `ci.import_contracts`.
"""

from importlinter import ContractCheck
from importlinter.contracts.forbidden import ForbiddenContract


class ForbiddenWhenPresentContract(ForbiddenContract):
    type_name = "forbidden_when_present"

    def check(self, graph, verbose: bool) -> ContractCheck:
        present = {m for m in self.source_modules if m.has_wildcard_expression() or m.expression in graph.modules}
        absent = sorted(m.expression for m in self.source_modules - present)
        if not present:
            return ContractCheck(kept=True, warnings=[f"{', '.join(absent)} does not exist yet: nothing to check."])
        self.source_modules = present
        result = super().check(graph, verbose)
        result.warnings += [f"{name} does not exist yet: not checked." for name in absent]
        return result
