"""Real-molecule environment: hand-written retro templates (rdkit) as a syntheseus reaction model.

Why: the toy chains in `data.py` have hashed costs with no chemical meaning. Here 16 textbook
disconnections, written as reaction SMARTS in the retro direction (product >> reactants), are
applied with rdkit to drug-like targets, and every reaction gets a cost vector in [0, 1]^3 from
the template and the reactant molecules (objectives below). The single-step model is fixed and
finite, so brute force over the AND-OR graph to a depth bound still gives the true Pareto front.

Objectives (all minimised; building blocks cost 0, so the zero heuristic stays admissible):
  0. step cost: a per-template guess of reagent price and effort (Pd couplings high, TFA low);
  1. hazard: a per-template greenness/safety score (acyl chlorides, alkylating agents, Pd, DMF
     high; Fischer esterification and ester hydrolysis low);
  2. material: a price proxy of the purchased reactants computed with rdkit, the sum over
     building-block reactants of ((heavy atoms + 4 * stereocentres) / 20)^2, capped at 1. Being
     super-linear, it makes buying an advanced intermediate compete with making it.
Every entry is rounded to a multiple of 1/256, so route sums are exact in floating point and the
search and the brute force can compare fronts with `==`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from .data import Expander, Reaction

if TYPE_CHECKING:  # rdkit and syntheseus load lazily, so `import families.moretro` stays cheap
    from rdkit.Chem.rdChemReactions import ChemicalReaction
    from syntheseus.interface.models import BackwardReactionModel

N_OBJECTIVES = 3
_GRID = 256  # costs are multiples of 1 / _GRID (exact binary fractions)
_PRICE_SCALE = 20.0  # a building block of 20 heavy atoms (stereocentres count 4) has price 1


@dataclass(frozen=True)
class Template:
    """A retro template: `smarts` maps one product pattern to reactant patterns."""

    name: str
    smarts: str
    step_cost: float  # objective 0
    hazard: float  # objective 1
    note: str


# Amine partners are never ammonia (H0/H1 only) and never amides/sulfonamides/nitro groups.
_AMINE = "[NX3;H0,H1;+0;!$(N[C,S]=[O,S])"
_ACYL = "[C;$(C-[#6]):1](=[O:2])"  # carbonyl on carbon: excludes carbamates and ureas
TEMPLATES: tuple[Template, ...] = (
    Template(
        "amide_coupling",
        _ACYL + "!@[NX3;H0,H1;+0;!$(N(C=O)C=O);!$(NS(=O)=O):3]>>[C:1](=[O:2])O.[N:3]",
        0.50,
        0.40,
        "acid + amine, HATU/EDC in DMF",
    ),
    Template(
        "amide_acyl_chloride",
        _ACYL + "!@[NX3;H0,H1;+0;!$(N(C=O)C=O);!$(NS(=O)=O):3]>>[C:1](=[O:2])Cl.[N:3]",
        0.25,
        0.70,
        "acyl chloride + amine (Schotten-Baumann)",
    ),
    Template(
        "ester_fischer",
        _ACYL + "!@[OX2:3][CX4:4]>>[C:1](=[O:2])O.[O:3][C:4]",
        0.30,
        0.15,
        "acid + alkyl alcohol, H2SO4 cat.",
    ),
    Template(
        "ester_acyl_chloride",
        _ACYL + "!@[OX2:3][#6:4]>>[C:1](=[O:2])Cl.[O:3][#6:4]",
        0.20,
        0.65,
        "acyl chloride + alcohol/phenol, pyridine",
    ),
    Template(
        "acyl_chloride_formation",
        "[C;$(C-[#6]):1](=[O:2])Cl>>[C:1](=[O:2])O",
        0.10,
        0.80,
        "acyl chloride <- acid, SOCl2 (HCl, SO2 off-gas)",
    ),
    Template(
        "ester_hydrolysis",
        _ACYL + "[OX2;H1:3]>>[C:1](=[O:2])[O:3]C",
        0.15,
        0.10,
        "acid <- methyl ester, LiOH/H2O",
    ),
    Template(
        "suzuki",
        "[c:1]-!@[c:2]>>[c:1]Br.[c:2]B(O)O",
        0.70,
        0.50,
        "aryl bromide + aryl boronic acid, Pd(PPh3)4",
    ),
    Template(
        "reductive_amination",
        "[CX4;H1,H2;$(C[#6]):1]-!@" + _AMINE + ":2]>>[C:1]=O.[N:2]",
        0.40,
        0.45,
        "aldehyde/ketone + amine, NaBH(OAc)3 in DCE",
    ),
    Template(
        "n_alkylation",
        "[CX4;H2;$(C[#6]):1]-!@" + _AMINE + ":2]>>[C:1]Br.[N:2]",
        0.25,
        0.75,
        "alkyl bromide + amine, K2CO3 (alkylating agent)",
    ),
    Template(
        "williamson_ether",
        "[CX4;H2,H3:1]-!@[OX2:2]-[#6;!$(C=O):3]>>[C:1]Br.[O:2][#6:3]",
        0.25,
        0.60,
        "alkyl bromide + alcohol/phenol, K2CO3 or NaH",
    ),
    Template(
        "snar",
        "[c;$(c:n):1]-!@" + _AMINE + ":2]>>[c:1]Cl.[N:2]",
        0.30,
        0.65,
        "2-chloro azine + amine, DIPEA in NMP (reprotoxic solvent), heat",
    ),
    Template(
        "buchwald_hartwig",
        "[c:1]-!@" + _AMINE + ":2]>>[c:1]Br.[N:2]",
        0.70,
        0.45,
        "aryl bromide + amine, Pd2dba3/XPhos in t-BuOH",
    ),
    Template(
        "boc_deprotection",
        "[NX3;H1;+0;R;!$(N[C,S]=[O,S]);!$(Na):1]>>CC(C)(C)OC(=O)[N:1]",
        0.15,
        0.50,
        "ring NH <- N-Boc, TFA in DCM",
    ),
    Template(
        "nitro_reduction",
        "[c:1]-[NX3;H2;+0:2]>>[c:1][N+:2](=O)[O-]",
        0.20,
        0.30,
        "aniline <- nitroarene, H2 with Pd/C",
    ),
    Template(
        "sulfonamide",
        "[#6:1][S:2](=[O:3])(=[O:4])-!@[NX3;H0,H1;+0:5]>>[#6:1][S:2](=[O:3])(=[O:4])Cl.[N:5]",
        0.25,
        0.50,
        "sulfonyl chloride + amine, pyridine",
    ),
    Template(
        "ketone_reduction",
        "[CX4;H1:1]([#6:3])([#6:4])[OX2;H1:2]>>[C:1]([#6:3])([#6:4])=[O:2]",
        0.15,
        0.25,
        "secondary alcohol <- ketone, NaBH4",
    ),
)
TEMPLATE_BY_NAME = {t.name: t for t in TEMPLATES}

# Purchasable building blocks (canonicalised on use): cheap small reagents plus a few advanced
# intermediates, which shorten routes but cost more material (objective 2).
BUILDING_BLOCKS: tuple[str, ...] = (
    # acids and acyl/sulfonyl chlorides
    "CC(=O)O",
    "OC(=O)c1ccccc1",
    "COc1ccc(C(=O)O)cc1",
    "O=C(O)c1ccc(Br)cc1",
    "O=C(O)c1ccc([N+](=O)[O-])cc1",
    "Nc1ccc(C(=O)O)cc1",
    "CC(=O)Cl",
    "O=C(Cl)c1ccccc1",
    "Cc1ccc(S(=O)(=O)Cl)cc1",
    # alcohols, phenols, carbonyls
    "CO",
    "CCO",
    "Oc1ccccc1",
    "Oc1ccc(Br)cc1",
    "O=[N+]([O-])c1ccc(O)cc1",
    "O=Cc1ccccc1",
    "COc1ccc(C=O)cc1",
    "O=Cc1ccc(O)cc1",
    "CC(=O)c1ccccc1",
    # amines
    "C1COCCN1",
    "C1CNCCN1",
    "CC(C)(C)OC(=O)N1CCNCC1",
    "NCc1ccccc1",
    "Nc1ccccc1",
    "Nc1ccc(O)cc1",
    # aryl halides and boronic acids
    "Brc1ccccc1",
    "COc1ccc(Br)cc1",
    "Clc1ccccn1",
    "Brc1ccccn1",
    "OB(O)c1ccccc1",
    "COc1ccc(B(O)O)cc1",
    "COC(=O)c1ccc(B(O)O)cc1",
    # alkyl bromides
    "CBr",
    "CCBr",
    "BrCc1ccccc1",
    "COc1ccc(CBr)cc1",
    # advanced intermediates (dearer per the material objective)
    "CCOC(=O)c1ccc(N)cc1",
    "COC(=O)c1ccc(Br)cc1",
    "Nc1ccc(OCc2ccccc2)cc1",
    "c1ccc(N2CCNCC2)nc1",
    "Cc1ccc(S(=O)(=O)N2CCNCC2)cc1",
    "COc1ccc(-c2ccc(C(=O)O)cc2)cc1",
)

# Drug-like demo targets: name -> SMILES.
TARGETS: dict[str, str] = {
    "paracetamol": "CC(=O)Nc1ccc(O)cc1",
    "O-benzyl paracetamol (ether + amide)": "CC(=O)Nc1ccc(OCc2ccccc2)cc1",
    "N-benzoyl benzocaine (amide + ester)": "CCOC(=O)c1ccc(NC(=O)c2ccccc2)cc1",
    "biaryl ester (Suzuki)": "COC(=O)c1ccc(-c2ccc(OC)cc2)cc1",
    "4-methoxybenzyl morpholine (amine + ether)": "COc1ccc(CN2CCOCC2)cc1",
    "tosyl pyridyl piperazine (SNAr + sulfonamide)": "Cc1ccc(S(=O)(=O)N2CCN(c3ccccn3)CC2)cc1",
    "biaryl benzylamide (Suzuki + amide)": "COc1ccc(-c2ccc(C(=O)NCc3ccccc3)cc2)cc1",
    "aryl piperazine benzylamide (amination + amide)": "O=C(NCc1ccccc1)c1ccc(N2CCN(c3ccccn3)CC2)cc1",
    "biphenyl amide of benzocaine (Suzuki + amide + ester)": "CCOC(=O)c1ccc(NC(=O)c2ccc(-c3ccccc3)cc2)cc1",
    "4-methoxybenzyl pyridyl piperazine (amine + SNAr)": "COc1ccc(CN2CCN(c3ccccn3)CC2)cc1",
}


def canonical_smiles(smiles: str) -> str:
    """rdkit canonical SMILES; a clear ValueError for anything rdkit cannot parse."""
    from rdkit import Chem, rdBase

    if not isinstance(smiles, str) or not smiles.strip():
        raise ValueError(f"Invalid SMILES {smiles!r}: expected a non-empty SMILES string such as 'CCO'.")
    with rdBase.BlockLogs():  # rdkit's own parse errors go to stderr; we raise instead
        mol = Chem.MolFromSmiles(smiles)
    if mol is None or mol.GetNumAtoms() == 0:
        raise ValueError(
            f"Invalid SMILES {smiles!r}: rdkit could not parse it; check brackets, ring closures and valences."
        )
    return Chem.MolToSmiles(mol)


@cache
def _compiled(name: str) -> ChemicalReaction:
    from rdkit.Chem import AllChem

    rxn = AllChem.ReactionFromSmarts(TEMPLATE_BY_NAME[name].smarts)
    if rxn.GetNumReactantTemplates() != 1:
        raise ValueError(f"Template {name!r} must have exactly one product pattern on the left of '>>'.")
    rxn.Initialize()
    return rxn


def apply_template(name: str, smiles: str) -> list[tuple[str, ...]]:
    """Every distinct reactant set (sorted canonical SMILES) that template `name` gives for `smiles`.

    Outcomes that fail sanitisation or that contain the product itself are dropped.
    """
    from rdkit import Chem, rdBase

    if name not in TEMPLATE_BY_NAME:
        raise ValueError(f"Unknown template {name!r}; choose one of {sorted(TEMPLATE_BY_NAME)}.")
    product = canonical_smiles(smiles)
    out: list[tuple[str, ...]] = []
    with rdBase.BlockLogs():
        for outcome in _compiled(name).RunReactants((Chem.MolFromSmiles(product),)):
            try:
                for mol in outcome:
                    for atom in mol.GetAtoms():
                        if atom.HasProp("old_mapno"):  # bonds changed: let rdkit recount its Hs
                            atom.SetNumExplicitHs(0)  # (a chiral [C@H] carries an explicit H)
                            atom.SetNoImplicit(False)
                    Chem.SanitizeMol(mol)
                # round trip through SMILES so that the strings are truly canonical
                reactants = tuple(sorted(canonical_smiles(Chem.MolToSmiles(mol)) for mol in outcome))
            except (ValueError, RuntimeError):  # rdkit raises subclasses of these on bad valences
                continue
            if product not in reactants and reactants not in out:
                out.append(reactants)
    return out


def material_cost(reactants: Sequence[str], building_blocks: frozenset) -> float:
    """Objective 2: price proxy of the purchased reactants, sum of ((HA + 4 * stereo) / 20)^2, capped at 1.

    Only reactants in `building_blocks` are paid for here; an intermediate's cost is the cost of
    the sub-route that makes it. The square makes one big, advanced building block dearer than
    two small ones, so buying an intermediate competes with making it (fewer steps vs material).
    """
    from rdkit import Chem

    total = 0.0
    for smi in reactants:
        if smi not in building_blocks:
            continue
        mol = Chem.MolFromSmiles(smi)
        if mol is None:
            raise ValueError(f"Invalid SMILES {smi!r} among the reactants.")
        n_stereo = len(Chem.FindMolChiralCenters(mol, includeUnassigned=True, useLegacyImplementation=False))
        total += ((mol.GetNumHeavyAtoms() + 4 * n_stereo) / _PRICE_SCALE) ** 2
    return min(1.0, total)


def reaction_cost(template: str, reactants: Sequence[str], building_blocks: frozenset) -> tuple[float, ...]:
    """Cost vector (step cost, hazard, material) of one reaction, on the 1/256 grid."""
    if template not in TEMPLATE_BY_NAME:
        raise ValueError(f"Unknown template {template!r}; choose one of {sorted(TEMPLATE_BY_NAME)}.")
    t = TEMPLATE_BY_NAME[template]
    raw = (t.step_cost, t.hazard, material_cost(reactants, building_blocks))
    return tuple(round(v * _GRID) / _GRID for v in raw)


def template_model(**kwargs: object) -> BackwardReactionModel:
    """syntheseus `BackwardReactionModel` that applies `TEMPLATES` (built lazily: heavy imports)."""
    from syntheseus import Bag, Molecule, SingleProductReaction
    from syntheseus.interface.models import BackwardReactionModel

    class TemplateRetroModel(BackwardReactionModel):
        """Applies every hand-written retro template to each input molecule."""

        def _get_reactions(self, inputs: list, num_results: int) -> list:
            out = []
            for mol in inputs:
                rxns = []
                for t in TEMPLATES:
                    for reactants in apply_template(t.name, mol.smiles):
                        bag = Bag([Molecule(s, canonicalize=False, make_rdkit_mol=False) for s in reactants])
                        rxns.append(
                            SingleProductReaction(product=mol, reactants=bag, metadata={"template": t.name})
                        )
                out.append(rxns[:num_results])
            return out

        def get_parameters(self) -> list:
            return []  # rule-based: nothing learned

    return TemplateRetroModel(**kwargs)


def template_expander(building_blocks: frozenset) -> Expander:
    """The template model as an `Expander` with property-derived cost vectors (3 objectives).

    Pass the same (canonical) `building_blocks` as to the search: they set the material cost.
    """
    from syntheseus import Molecule

    bb = frozenset(building_blocks)
    odd = sorted(s for s in bb if canonical_smiles(s) != s)
    if odd:
        raise ValueError(
            f"`building_blocks` must be canonical SMILES (the search matches strings), got {odd[:3]}; "
            "use `building_blocks()` or map `canonical_smiles` over your set."
        )
    model = template_model(use_cache=True, remove_duplicates=False)

    @cache
    def expand(smiles: str) -> tuple[Reaction, ...]:
        product = Molecule(canonical_smiles(smiles), canonicalize=False, make_rdkit_mol=False)
        out = []
        for rxn in model([product], num_results=10_000)[0]:
            reactants = tuple(sorted(m.smiles for m in rxn.reactants))
            name = rxn.metadata["template"]
            out.append(Reaction(product.smiles, reactants, reaction_cost(name, reactants, bb), name))
        return tuple(out)

    return lambda smiles: list(expand(smiles))


def building_blocks() -> frozenset:
    """The purchasable set, canonicalised."""
    return frozenset(canonical_smiles(s) for s in BUILDING_BLOCKS)
