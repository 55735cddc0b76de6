"""Libvirt domain profiles: XML templates in vm-definitions/, one per hypervisor variant.

A profile fills in only what must be: paths (kernel, initrd, logs, emulator), the
bench's part of the command line, the domain's name and type. Templating is strict
(string.Template.substitute): a placeholder left unfilled is an error, never XML.
"""
from __future__ import annotations

import dataclasses
import string
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .errors import BadProfile, UnknownProfile
from .paths import PROFILE_DIR

METADATA_NS = "urn:x-randomness-bench:profile:1"
PLACEHOLDERS = ("name", "domain_type", "emulator", "kernel", "initrd", "cmdline",
                "console_log", "data_log")


QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
# <bench:requires>: what the host must give a profile. any: TCG will do; hyperv:
# SynIC and VP_INDEX (KVM, or the bench's patched QEMU under TCG); kvm: KVM itself
# (a profile copied from a real guest with host-passthrough, say).
REQUIRES = ("any", "hyperv", "kvm")
# A domain rewritten here keeps the prefixes the profiles use.
ET.register_namespace("qemu", QEMU_NS)
ET.register_namespace("bench", METADATA_NS)


@dataclass(frozen=True)
class Capabilities:
    """What a profile gives the guest, read from its domain XML (never declared twice)."""
    vcpus: int
    numa_nodes: int
    virtio_rng: bool         # a virtio-rng device (credits the input pool directly)
    cpu_rng: bool            # RDRAND/RDSEED present (not disabled in the CPU model)
    trusted_rdrand: bool     # RDRAND present and random.trust_cpu=on
    input_devices: bool      # the PS/2 controller is there (no -machine i8042=off)
    hyperv: bool
    stimer_mode: str         # Hyper-V synthetic timers: "direct", "message" or "none"
    reference_tsc: bool      # Hyper-V clock (hv-time): the reference TSC page
    invariant_tsc: bool      # CPUID invtsc asked for (constant_tsc, nonstop_tsc)
    deterministic: bool      # QEMU -icount: interrupt timing follows instructions
    sint_injector: bool      # QEMU's hyperv-testdev: the guest can raise a SINT itself
    vm_generation_id: bool   # <genid/>: a VM generation ID, new in each restored clone
    enlightened_apic: bool = False   # Hyper-V <vapic state='on'/>: EOI, ICR, TPR by MSR

    @property
    def interrupt_only(self) -> bool:
        """Interrupts are the RNG's only entropy source: nothing credits it directly."""
        return not (self.virtio_rng or self.trusted_rdrand)


def _capabilities(root: ET.Element) -> Capabilities:
    qemu_args = [a.get("value", "") for a in root.iter(f"{{{QEMU_NS}}}arg")]
    cmdline = root.findtext("os/cmdline") or ""
    rdrand_off = any(f.get("name") == "rdrand" and f.get("policy") == "disable"
                     for f in root.iterfind("cpu/feature"))
    hyperv = root.find("features/hyperv")
    stimer = hyperv.find("stimer") if hyperv is not None else None
    if stimer is None or stimer.get("state") != "on":
        stimer_mode = "none"
    else:
        direct = stimer.find("direct")
        stimer_mode = "direct" if direct is not None and direct.get("state") == "on" \
            else "message"
    return Capabilities(
        vcpus=int(root.findtext("vcpu") or 1),
        numa_nodes=max(1, len(root.findall("cpu/numa/cell"))),
        virtio_rng=any(r.get("model") == "virtio" for r in root.iterfind("devices/rng")),
        cpu_rng=not rdrand_off,
        trusted_rdrand=not rdrand_off and "random.trust_cpu=on" in cmdline.split(),
        input_devices="i8042=off" not in qemu_args,
        hyperv=hyperv is not None,
        stimer_mode=stimer_mode,
        reference_tsc=hyperv is not None and any(
            t.get("name") == "hypervclock" and t.get("present") != "no"
            for t in root.iterfind("clock/timer")),
        invariant_tsc=any(f.get("name") == "invtsc" and f.get("policy") in ("require", "force")
                          for f in root.iterfind("cpu/feature")),
        deterministic=any(a.startswith("-icount") or a.startswith("shift=") for a in qemu_args),
        sint_injector="hyperv-testdev" in qemu_args,
        vm_generation_id=root.find("genid") is not None,
        enlightened_apic=hyperv is not None and any(
            v.get("state") == "on" for v in hyperv.iterfind("vapic")),
    )


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    requires: str        # REQUIRES: "any", "hyperv" (KVM, or our patched QEMU), "kvm"
    caps: Capabilities

    @property
    def template(self) -> str:
        return self.path.read_text()

    def render(self, **values: str) -> str:
        missing = set(PLACEHOLDERS) - values.keys()
        if missing:
            raise ValueError(f"profile {self.name}: no value for {', '.join(sorted(missing))}")
        return string.Template(self.template).substitute(values)


def _check_template(path: Path, text: str) -> None:
    """The templating rules, checked at load: only the bench's placeholders, each
    written $name or ${name} ($$ for a literal $), and XML once they are filled."""
    try:
        rendered = string.Template(text).substitute({key: "x" for key in PLACEHOLDERS})
    except KeyError as exc:
        raise BadProfile(f"profile {path}: unknown placeholder ${exc.args[0]} "
                         f"(known: {', '.join(PLACEHOLDERS)})") from None
    except ValueError as exc:
        raise BadProfile(f"profile {path}: bad placeholder ({exc}; write $$ for a "
                         "literal $)") from None
    try:
        ET.fromstring(rendered)
    except ET.ParseError as exc:
        raise BadProfile(f"profile {path}: not XML once its placeholders are filled "
                         f"({exc})") from None


def _read_profile(path: Path) -> Profile:
    text = path.read_text()
    try:
        # The template is XML except inside attribute/element text, so it parses as is.
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise BadProfile(f"profile {path}: not XML ({exc})") from None
    _check_template(path, text)
    meta = root.find(f"metadata/{{{METADATA_NS}}}profile")
    if meta is None:
        raise BadProfile(f"profile {path}: no <bench:profile> metadata")
    requires = (meta.findtext(f"{{{METADATA_NS}}}requires") or "any").strip()
    if requires not in REQUIRES:
        raise BadProfile(f"profile {path}: unknown <bench:requires> '{requires}' "
                         f"(known: {', '.join(REQUIRES)})")
    return Profile(
        name=path.stem,
        path=path,
        description=(meta.findtext(f"{{{METADATA_NS}}}description") or "").strip(),
        requires=requires,
        caps=_capabilities(root),
    )


# Where profiles are read from when no directory is given: vm-definitions/, or the
# user's own directory (bench --profiles-dir), set once at start.
_directory = PROFILE_DIR


def use_directory(directory: Path) -> None:
    """Read every profile from `directory` from now on."""
    global _directory
    if not directory.is_dir():
        raise BadProfile(f"profile directory '{directory}' does not exist")
    if not any(directory.glob("*.xml")):
        raise BadProfile(f"profile directory '{directory}' has no *.xml profile")
    _directory = directory


def all_profiles(directory: Path | None = None) -> dict[str, Profile]:
    """Every profile of the directory; BadProfile naming each bad file, one per line."""
    found: dict[str, Profile] = {}
    bad: list[str] = []
    for path in sorted((directory or _directory).glob("*.xml"), key=lambda p: p.stem):
        try:
            found[path.stem] = _read_profile(path)
        except BadProfile as exc:
            bad.append(str(exc))
    if bad:
        raise BadProfile("\n".join(bad))
    return found


def profiles_with(directory: Path | None = None, **wanted: object) -> list[str]:
    """Names of the profiles whose capabilities have these values, e.g.
    profiles_with(interrupt_only=True, hyperv=False).

    A deterministic (-icount) profile is the entropy assessment's negative
    control, not a hypervisor model: it is chosen only when asked for by name
    of capability (deterministic=True, or deterministic=None for either)."""
    wanted.setdefault("deterministic", False)
    if wanted["deterministic"] is None:
        del wanted["deterministic"]
    return [name for name, profile in all_profiles(directory).items()
            if all(getattr(profile.caps, key) == value for key, value in wanted.items())]


class Needs:
    """What a test needs of a profile, as capability values: declared on the test
    (`@pytest.mark.profiles(Needs(hyperv=True), ...)`, benchlib/testing/plugin.py) and
    resolved against the profiles of the run (vm-definitions/, or --profiles-dir)
    when the suite is collected. `first`: the first such profile only, for a test
    that needs one of a kind, not all. A capability Capabilities does not have is
    a BadProfile at once, naming it (a typo never silently matches nothing)."""

    def __init__(self, first: bool = False, **wanted: object) -> None:
        known = {f.name for f in dataclasses.fields(Capabilities)} | {"interrupt_only"}
        unknown = sorted(set(wanted) - known)
        if unknown:
            raise BadProfile(f"no profile capability '{unknown[0]}' (known: "
                             f"{', '.join(sorted(known))})")
        self.first = first
        self.wanted = wanted

    def matching(self) -> list[str]:
        """The names of every profile that has all of it (see profiles_with)."""
        return profiles_with(**self.wanted)

    def names(self) -> list[str]:
        """matching(), or only its first with first=True."""
        found = self.matching()
        return found[:1] if self.first else found

    def __contains__(self, name: object) -> bool:
        """`profile in NEED`: whether the named profile has what is needed."""
        return name in self.matching()

    def one(self) -> str:
        """The first such profile's name, or, when none has it, a name saying so
        (first_profile: looking it up is UnknownProfile, a skip naming the need)."""
        return first_profile(self.matching(), str(self))

    def first_only(self) -> "Needs":
        """The same need, for the first such profile only."""
        return Needs(first=True, **self.wanted)

    def __str__(self) -> str:
        what = ", ".join(f"{key}={value}" for key, value in self.wanted.items())
        return f"the first with {what}" if self.first else what


def profiles_needed(needs: tuple[Needs, ...]) -> list[str]:
    """Every profile any of `needs` names, in the order given, each once."""
    names: list[str] = []
    for need in needs:
        names += [name for name in need.names() if name not in names]
    return names


def first_profile(names: list[str], wanted: str) -> str:
    """The first of `names`, or, when none has what a test wants (a user's
    --profiles-dir may lack it), a name saying so: looking it up is UnknownProfile,
    which the suite turns into a skip naming what was missing."""
    return names[0] if names else f"(no profile: {wanted})"


# Interrupts are the only entropy, and no device of the profile raises one late in
# the kernel's init (no input devices, no Hyper-V): user space gets to look at the
# RNG before it is ready.
QUIET = Needs(interrupt_only=True, hyperv=False, input_devices=False)



def get_profile(name: str, directory: Path | None = None) -> Profile:
    profiles = all_profiles(directory)
    if name not in profiles:
        raise UnknownProfile(f"unknown profile '{name}' (known: {', '.join(profiles)})")
    return profiles[name]


def with_tsc_frequency(xml: str, hz: int) -> str:
    """A rendered domain whose fixed TSC rate (<timer name='tsc' frequency=.../>,
    which libvirt asks of a guest with invtsc before it saves one) is `hz`; a
    domain without one is returned as it is."""
    root = ET.fromstring(xml)
    timer = root.find("clock/timer[@name='tsc']")
    if timer is None or timer.get("frequency") is None:
        return xml
    timer.set("frequency", str(hz))
    return ET.tostring(root, encoding="unicode")


# After QEMU starts, libvirt reads back the guest CPU it got. With the generic
# method (QEMU's CPU "unavailable-features" property, libvirt 9.0) that is one QMP
# qom-get per CPU property, about 400 round trips: 0.57 s of every boot here, half
# of what the harness adds to a 6 s TCG boot (docs/tests.md). Without that
# capability libvirt uses its x86 method, two qom-gets (the CPU's feature-words
# and filtered-features), which knows no Hyper-V enlightenments: a domain with
# <hyperv> features fails there ("host doesn't support hyperv 'vpindex' feature"),
# so those keep the generic method.
QUICK_CPU_READBACK = "cpu-unavailable-features"


def with_quick_cpu_readback(xml: str) -> str:
    """A rendered domain that libvirt reads its guest CPU back from by the x86
    method (<qemu:capabilities><qemu:del capability='cpu-unavailable-features'/>);
    a domain with Hyper-V features, which that method cannot confirm, is returned
    as it is."""
    root = ET.fromstring(xml)
    if root.find("features/hyperv") is not None:
        return xml
    caps = root.find(f"{{{QEMU_NS}}}capabilities")
    if caps is None:
        caps = ET.SubElement(root, f"{{{QEMU_NS}}}capabilities")
    ET.SubElement(caps, f"{{{QEMU_NS}}}del", capability=QUICK_CPU_READBACK)
    return ET.tostring(root, encoding="unicode")


def with_spare_vcpus(xml: str, spare: int) -> str:
    """A rendered domain with `spare` more vCPU slots than the profile's vCPUs, empty
    at start (<vcpu current='N'>N+spare</vcpu>): the host can plug a vCPU into one
    while the guest runs (libvirt setvcpus --live), and the guest's ACPI tables
    list it as possible from the start, as a cloud VM's with room to grow."""
    root = ET.fromstring(xml)
    vcpu = root.find("vcpu")
    if vcpu is None or not (vcpu.text or "").strip().isdigit():
        raise BadProfile(f"domain {root.findtext('name')}: no <vcpu> count to add slots to")
    now = int(vcpu.get("current", vcpu.text or "0"))
    vcpu.set("current", str(now))
    vcpu.text = str(now + spare)
    return ET.tostring(root, encoding="unicode")


def with_suspend_to_mem(xml: str) -> str:
    """A rendered domain whose guest may suspend to RAM (ACPI S3: libvirt's
    <pm><suspend-to-mem enabled='yes'/>, QEMU's ICH9-LPC.disable_s3=0): it stays
    suspended until the host wakes it (libvirt's dompmwakeup)."""
    root = ET.fromstring(xml)
    pm = root.find("pm")
    if pm is None:
        pm = ET.Element("pm")
        # libvirt's schema puts <pm> after <on_crash> and before <devices>.
        root.insert(list(root).index(root.find("devices")), pm)
    for old in pm.findall("suspend-to-mem"):
        pm.remove(old)
    ET.SubElement(pm, "suspend-to-mem", enabled="yes")
    return ET.tostring(root, encoding="unicode")


def resize_memory(xml: str, mib: int) -> str:
    """A rendered domain with mib MiB of memory instead of the profile's: <memory>,
    <currentMemory> if present, and each NUMA cell scaled by the same factor (so
    that the cells still add up to the whole)."""
    root = ET.fromstring(xml)
    memory = root.find("memory")
    if memory is None:
        raise BadProfile(f"domain {root.findtext('name')}: no <memory> to resize")
    scale = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}
    old = float(memory.text or 0) * scale.get(memory.get("unit", "KiB"), 1 / 1024)
    for element in (memory, root.find("currentMemory")):
        if element is not None:
            element.text, element.attrib["unit"] = str(mib), "MiB"
    for cell in root.iter("cell"):
        share = float(cell.get("memory", 0)) * scale.get(cell.get("unit", "KiB"), 1 / 1024)
        cell.set("memory", str(round(mib * share / old)) if old else str(mib))
        cell.set("unit", "MiB")
    return ET.tostring(root, encoding="unicode")
