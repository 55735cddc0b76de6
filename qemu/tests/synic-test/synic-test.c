/*
 * Bare-metal guest test of QEMU's Hyper-V SynIC emulation under TCG.
 *
 * Booted by QEMU as a multiboot kernel with -device hyperv-testdev (which
 * echoes HvPostMessage messages back to a SINT and turns HvSignalEvent into
 * an event flag + SINT) and -device isa-debug-exit. It checks, in order:
 * the Hyper-V CPUID leaves, the hypercall page, the VP index and reference
 * time MSRs, message delivery, re-delivery of a message that found its slot
 * busy once the guest writes EOM, a message posted to a masked SINT (kept
 * in its slot, raised on unmask), SINT auto-EOI, #GP and #UD cases (VMCALL at
 * CPL 3, and in a nested SVM guest), the TLFS's error paths (MSRs of
 * enlightenments not offered under hv-enforce-cpuid, the write-only EOI MSR,
 * a locked hypercall MSR, invalid hypercall input values), HvSignalEvent,
 * HvNotifyLongSpinWait, the periodic
 * synthetic timer 0 in message mode, the reference TSC page against the
 * time reference counter, reference time against an independent clock (the
 * ACPI PM timer), synthetic timer 1 in direct mode (its period
 * and that it posts no message), a save and restore into a new QEMU
 * process with both timers running, a second vCPU (unplugged with a
 * message in flight, then a new one hot-added in its place: the partition's
 * MSRs and hypercalls there), and long mode. Output goes to COM1; the
 * result is the QEMU exit status (1: pass, 3: fail).
 */
#include <stdint.h>

#define HV_X64_MSR_GUEST_OS_ID      0x40000000
#define HV_X64_MSR_HYPERCALL        0x40000001
#define HV_HYPERCALL_LOCKED         (1u << 1)
#define HV_X64_MSR_VP_INDEX         0x40000002
#define HV_X64_MSR_RESET            0x40000003
#define HV_X64_MSR_TIME_REF_COUNT   0x40000020
#define HV_X64_MSR_TSC_FREQUENCY    0x40000022
#define HV_X64_MSR_EOI              0x40000070
#define HV_X64_MSR_APIC_ASSIST_PAGE 0x40000073
#define HV_X64_MSR_REFERENCE_TSC    0x40000021
#define HV_X64_MSR_SCONTROL         0x40000080
#define HV_X64_MSR_SVERSION         0x40000081
#define HV_X64_MSR_SIEFP            0x40000082
#define HV_X64_MSR_SIMP             0x40000083
#define HV_X64_MSR_EOM              0x40000084
#define HV_X64_MSR_SINT0            0x40000090
#define HV_X64_MSR_STIMER0_CONFIG   0x400000B0
#define HV_X64_MSR_STIMER0_COUNT    0x400000B1
#define HV_X64_MSR_STIMER1_CONFIG   0x400000B2
#define HV_X64_MSR_STIMER1_COUNT    0x400000B3

/* the AP's real-mode start (a page below 1 MiB, clear of the multiboot info) */
#define AP_TRAMPOLINE   0x7000
#define HYPERCALL_PAGE  0x200000
#define SIMP_PAGE       0x201000
#define SIEFP_PAGE      0x202000
#define INPUT_PAGE      0x203000
#define TSC_PAGE        0x204000
/* long mode: identity map of the first GiB in 2 MiB pages */
#define LM_PML4         0x300000
#define LM_PDPT         0x301000
#define LM_PD           0x302000
/* the AP's own SynIC pages and hypercall input page */
#define AP_SIMP_PAGE    0x205000
#define AP_SIEFP_PAGE   0x206000
#define AP_INPUT_PAGE   0x207000
/* where a locked hypercall MSR is asked to move the page (unused otherwise) */
#define SPARE_PAGE      0x208000

/* how long the guest waits to be saved and restored: 60 s of reference time */
#define SAVE_RESTORE_WAIT   600000000ull
/* how long it waits for the script to hot-add a vCPU: 60 s of reference time */
#define HOT_ADD_WAIT        600000000ull
/* the AP's APIC ID and CPU hotplug selector; the hot-added vCPU's (-smp 2,maxcpus=3) */
#define AP_CPU              1
#define HOT_CPU             2
#define MSG_SINT        2
#define EVT_SINT        3
#define TIMER_SINT      4
#define MSG_VECTOR      0x50
#define EVT_VECTOR      0x51
#define TIMER_VECTOR    0x52
#define DIRECT_VECTOR   0x53
#define MSG_CONN        1
#define EVT_CONN        2
#define AP_MSG_CONN     3       /* a message connection to VP 1, SINT2 */

#define HV_MESSAGE_TIMER_EXPIRED    0x80000010u
#define HV_MESSAGE_FLAG_PENDING     1

#define TESTDEV_PORT            0x3000
#define TESTDEV_MSG_CONN_CREATE 4
#define TESTDEV_EVT_CONN_CREATE 6

#define APIC_BASE   0xFEE00000u

struct hv_message {
    uint32_t type;
    uint8_t payload_size;
    uint8_t flags;
    uint8_t reserved[2];
    uint64_t sender;
    uint8_t payload[240];
};

struct hv_post_message_input {
    uint32_t connection_id;
    uint32_t reserved;
    uint32_t message_type;
    uint32_t payload_size;
    uint8_t payload[240];
};

static volatile struct hv_message *const msg_page =
    (volatile struct hv_message *)SIMP_PAGE;
static volatile uint32_t *const evt_page = (volatile uint32_t *)SIEFP_PAGE;
static void *hypercall_page = (void *)HYPERCALL_PAGE;

static volatile uint32_t irq_count[256];
/* boot.S: where an expected #UD or #GP resumes, and which one came */
volatile uint32_t fault_resume, fault_vector;
/*
 * The direct-mode timer's period: 10 ms in reference time's 100 ns units,
 * long beside the delay of a handler on a loaded host.
 */
#define DIRECT_PERIOD 100000ull
static volatile uint64_t direct_first, direct_last, direct_min_gap = ~0ull;
/* auto-EOI test: the handler does not EOI this vector at the APIC */
static volatile uint32_t no_apic_eoi_vector;
static volatile uint32_t timer_msgs;
/* expiration time carried by the last HVMSG_TIMER_EXPIRED message */
static volatile uint64_t timer_last_exp;
/* the first TIMER_LOG messages' payloads: timer index, expiration, delivery */
#define TIMER_LOG 32
static volatile uint32_t timer_log_index[TIMER_LOG];
static volatile uint64_t timer_log_exp[TIMER_LOG], timer_log_delivery[TIMER_LOG];
static int failures;

static inline void outb(uint16_t port, uint8_t v)
{
    __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outl(uint16_t port, uint32_t v)
{
    __asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline uint32_t inl(uint16_t port)
{
    uint32_t v;
    __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline void outw(uint16_t port, uint16_t v)
{
    __asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint64_t rdmsr(uint32_t msr)
{
    uint32_t lo, hi;
    __asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
    return (uint64_t)hi << 32 | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
    __asm__ volatile("wrmsr" : : "c"(msr), "a"((uint32_t)v),
                     "d"((uint32_t)(v >> 32)) : "memory");
}

#define UD_VECTOR 6
#define GP_VECTOR 13

/* WRMSR, resuming after it if it faults: the vector that came, or 0 */
static uint32_t wrmsr_fault(uint32_t msr, uint64_t v)
{
    fault_vector = 0;
    __asm__ volatile("movl $1f, fault_resume\n\t"
                     "wrmsr\n"
                     "1:\tmovl $0, fault_resume"
                     : : "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32))
                     : "memory");
    return fault_vector;
}

/* RDMSR, resuming after it if it faults: the vector that came, or 0 */
static uint32_t rdmsr_fault(uint32_t msr)
{
    uint32_t lo, hi;

    fault_vector = 0;
    __asm__ volatile("movl $1f, fault_resume\n\t"
                     "rdmsr\n"
                     "1:\tmovl $0, fault_resume"
                     : "=a"(lo), "=d"(hi) : "c"(msr) : "memory");
    (void)lo;
    (void)hi;
    return fault_vector;
}

/* VMCALL (code in EDX:EAX, as the 32-bit ABI), resuming after it if it faults */
static uint32_t vmcall_fault(uint32_t code)
{
    uint32_t eax = code, edx = 0;

    fault_vector = 0;
    __asm__ volatile("movl $1f, fault_resume\n\t"
                     "vmcall\n"
                     "1:\tmovl $0, fault_resume"
                     : "+a"(eax), "+d"(edx) : "b"(0), "c"(0), "D"(0), "S"(0)
                     : "memory", "cc");
    return fault_vector;
}

static inline void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b,
                         uint32_t *c, uint32_t *d)
{
    __asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d)
                     : "a"(leaf), "c"(0));
}

static void putc_serial(char c)
{
    while (!(inb(0x3f8 + 5) & 0x20)) {
    }
    outb(0x3f8, c);
}

static void puts_serial(const char *s)
{
    while (*s) {
        if (*s == '\n') {
            putc_serial('\r');
        }
        putc_serial(*s++);
    }
}

static void puthex(uint64_t v)
{
    int i;

    puts_serial("0x");
    for (i = 60; i >= 0; i -= 4) {
        putc_serial("0123456789abcdef"[(v >> i) & 0xf]);
    }
}

static void qemu_exit(uint32_t code)
{
    outl(0xf4, code);   /* isa-debug-exit: status (code << 1) | 1 */
    for (;;) {
        __asm__ volatile("cli; hlt");
    }
}

static void check(int ok, const char *what)
{
    puts_serial(ok ? "SYNIC-TEST: ok   " : "SYNIC-TEST: FAIL ");
    puts_serial(what);
    puts_serial("\n");
    if (!ok) {
        failures++;
    }
}

static uint64_t ref_time(void)
{
    return rdmsr(HV_X64_MSR_TIME_REF_COUNT);
}

/* spin until *p >= want or 2s of reference time pass */
static int wait_count(volatile uint32_t *p, uint32_t want)
{
    uint64_t deadline = ref_time() + 20000000;

    while (*p < want) {
        if (ref_time() > deadline) {
            return 0;
        }
        __asm__ volatile("pause");
    }
    return 1;
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* (a * b) >> 64, from 32-bit halves */
static uint64_t mul_hi64(uint64_t a, uint64_t b)
{
    uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;

    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

struct hv_ref_tsc_page {
    volatile uint32_t sequence;
    uint32_t reserved;
    volatile uint64_t scale;
    volatile int64_t offset;
};

static uint64_t hypercall(uint64_t control, uint64_t input, uint64_t output)
{
    uint32_t eax = control, edx = control >> 32;

    __asm__ volatile("call *%[pg]"
                     : "+a"(eax), "+d"(edx)
                     : "b"((uint32_t)(input >> 32)), "c"((uint32_t)input),
                       "D"((uint32_t)(output >> 32)), "S"((uint32_t)output),
                       [pg] "m"(hypercall_page)
                     : "memory", "cc");
    return (uint64_t)edx << 32 | eax;
}

/*
 * An independent clock: the ACPI PM timer of the PIIX4 (-M pc), 3.579545 MHz,
 * 24 bits, which QEMU runs from its virtual clock and which no Hyper-V code
 * computes. Its I/O base is what the firmware put in the PIIX4 PM function's
 * PMBASE (PCI 00:01.3, register 0x40); 0 if that function is not there or its
 * I/O space is off.
 */
#define PIIX4_PM_BDF        ((1 << 3) | 3)
#define PIIX4_PMBASE        0x40
#define PIIX4_PMREGMISC     0x80
#define PM_TIMER_OFFSET     8
#define PM_TIMER_HZ         3579545ull
#define PM_TIMER_MASK       0xffffff
/* reference time counts 100 ns units */
#define REF_HZ              10000000ull
/* how long the two clocks are compared: 0.5 s of reference time */
#define CLOCK_WINDOW_REF    5000000ull
/* the most the two rates may differ, as a fraction: 1/50 (2 %) */
#define CLOCK_AGREE_DIV     50

static uint32_t pci_read32(uint32_t bdf, uint32_t reg)
{
    outl(0xcf8, 0x80000000u | bdf << 8 | reg);
    return inl(0xcfc);
}

static uint16_t pm_timer_port(void)
{
    if ((pci_read32(PIIX4_PM_BDF, 0) & 0xffff) != 0x8086 ||
        !(pci_read32(PIIX4_PM_BDF, PIIX4_PMREGMISC) & 1)) {
        return 0;
    }
    return (pci_read32(PIIX4_PM_BDF, PIIX4_PMBASE) & 0xffc0) + PM_TIMER_OFFSET;
}

/*
 * Reference time against the PM timer over CLOCK_WINDOW_REF: their rates
 * agree within 1/CLOCK_AGREE_DIV. The PM timer is read often enough that
 * its 24 bits never wrap unseen (4.7 s).
 */
static int ref_time_agrees_with_pm_timer(const char *when)
{
    uint16_t port = pm_timer_port();
    uint64_t ticks = 0, ref0, ref, lhs, rhs;
    uint32_t last, now;

    if (!port) {
        puts_serial("    no ACPI PM timer found\n");
        return 0;
    }
    last = inl(port) & PM_TIMER_MASK;
    ref0 = ref_time();
    do {
        now = inl(port) & PM_TIMER_MASK;
        ticks += (now - last) & PM_TIMER_MASK;
        last = now;
        ref = ref_time();
    } while (ref - ref0 < CLOCK_WINDOW_REF);
    /* ticks / PM_TIMER_HZ against (ref - ref0) / REF_HZ, without a division */
    lhs = ticks * REF_HZ;
    rhs = (ref - ref0) * PM_TIMER_HZ;
    if ((lhs > rhs ? lhs - rhs : rhs - lhs) * CLOCK_AGREE_DIV < rhs) {
        return 1;
    }
    puts_serial("    ");
    puts_serial(when);
    puts_serial(": PM timer ticks ");
    puthex(ticks);
    puts_serial(" in reference time ");
    puthex(ref - ref0);
    puts_serial("\n");
    return 0;
}

/*
 * The reference TSC page's time (TSC * scale >> 64 + offset) lies between
 * two reads of the time reference counter, 100 times in a row; the first
 * miss is printed.
 */
static int tsc_page_in_range(void)
{
    struct hv_ref_tsc_page *pg = (struct hv_ref_tsc_page *)TSC_PAGE;
    uint64_t r0, r1, page_ref;
    int i;

    for (i = 0; i < 100; i++) {
        r0 = ref_time();
        page_ref = mul_hi64(rdtsc(), pg->scale) + pg->offset;
        r1 = ref_time();
        if (page_ref < r0 || page_ref > r1) {
            puts_serial("SYNIC-TEST: page ");
            puthex(page_ref);
            puts_serial(" MSR ");
            puthex(r0);
            puts_serial("..");
            puthex(r1);
            puts_serial("\n");
            return 0;
        }
    }
    return 1;
}

/* HvPostMessage's input: a 16-byte payload of `fill` to connection `conn` */
static void post_input(uint32_t page, uint32_t conn, uint32_t type, char fill)
{
    struct hv_post_message_input *in = (void *)page;
    int i;

    in->connection_id = conn;
    in->reserved = 0;
    in->message_type = type;
    in->payload_size = 16;
    for (i = 0; i < 16; i++) {
        in->payload[i] = fill;
    }
}

static uint16_t post_message(uint32_t type, char fill)
{
    uint64_t deadline = ref_time() + 20000000;
    uint16_t status;

    post_input(INPUT_PAGE, MSG_CONN, type, fill);
    do {
        /* HvPostMessage, slow call: input GPA in EBX:ECX */
        status = hypercall(0x005c, INPUT_PAGE, 0);
        /* 0x13: HV_STATUS_INSUFFICIENT_BUFFERS, previous one in flight */
    } while (status == 0x13 && ref_time() < deadline);
    return status;
}

/*
 * Without hv-time there is no reference counter to time waits by: these wait
 * for a count or a flag up to TSC_WAIT cycles of the guest's TSC (seconds at
 * the rates TCG gives it).
 */
#define TSC_WAIT            20000000000ull
/*
 * how long the SynIC-only guest waits to be saved and restored: under the
 * script's 120 s per QEMU, so that a save that never came is this guest's FAIL
 */
#define SAVE_WAIT_TSC       (5 * TSC_WAIT)

/*
 * HvPostMessage of one message to MSG_CONN from an input page, tried again up
 * to TSC_WAIT cycles while the answer is 0x13 (HV_STATUS_INSUFFICIENT_BUFFERS:
 * QEMU's main loop has not completed the connection's previous message yet).
 * post_message() times the same by the reference counter, which a vCPU
 * without hv-time lacks.
 */
static uint16_t post_message_tsc(uint32_t page, uint32_t type, char fill)
{
    uint64_t end = rdtsc() + TSC_WAIT;
    uint16_t status;

    post_input(page, MSG_CONN, type, fill);
    do {
        status = hypercall(0x005c, page, 0) & 0xffff;
    } while (status == 0x13 && rdtsc() < end);
    return status;
}

static int wait_count_tsc(volatile uint32_t *p, uint32_t want)
{
    uint64_t end = rdtsc() + TSC_WAIT;

    while (*p < want && rdtsc() < end) {
        __asm__ volatile("pause");
    }
    return *p >= want;
}

/*
 * QEMU's firmware configuration device (fw_cfg, I/O ports): the QEMU that
 * restores the guest in the save/restore check is started with one file
 * more than the one that saved it, and that file tells the guest it now
 * runs in the restored QEMU. fw_cfg's contents are the command line's, not
 * migrated state.
 */
#define FW_CFG_PORT_SEL     0x510
#define FW_CFG_PORT_DATA    0x511
#define FW_CFG_FILE_DIR     0x19
#define FW_CFG_NAME_LEN     56      /* an entry: size, select, reserved, name */
#define FW_CFG_MAX_FILES    256     /* more is a garbled read, not a directory */
#define RESTORED_FILE       "opt/synic-test/restored"
/* the SynIC-only run (hv-synic without hv-time or hv-stimer): synic_only_test() */
#define SYNIC_ONLY_FILE     "opt/synic-test/synic-only"

static uint32_t fw_cfg_read_be32(void)
{
    uint32_t v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        v = v << 8 | inb(FW_CFG_PORT_DATA);
    }
    return v;
}

/* is `name` in fw_cfg's file directory? */
static int fw_cfg_has_file(const char *name)
{
    char entry[FW_CFG_NAME_LEN];
    uint32_t files, f;
    int i;

    outw(FW_CFG_PORT_SEL, FW_CFG_FILE_DIR);
    files = fw_cfg_read_be32();
    if (files > FW_CFG_MAX_FILES) {
        return 0;
    }
    for (f = 0; f < files; f++) {
        fw_cfg_read_be32();                     /* size */
        fw_cfg_read_be32();                     /* select, reserved */
        for (i = 0; i < FW_CFG_NAME_LEN; i++) {
            entry[i] = inb(FW_CFG_PORT_DATA);
        }
        for (i = 0; i < FW_CFG_NAME_LEN && entry[i] == name[i] && name[i]; i++) {
        }
        if (i < FW_CFG_NAME_LEN && entry[i] == name[i]) {
            return 1;                           /* both ended together */
        }
    }
    return 0;
}

void isr_handler(uint32_t vector);
/* What the AP (VP 1) received on its own SynIC */
static volatile uint32_t ap_started, ap_vp_index, ap_timer_msgs, ap_msgs, ap_msg_type;
static volatile uint32_t ap_post_request, ap_post_status = 0xffffffff, ap_posts_done;
/* what the AP read of its own Hyper-V MSRs when it was started again (INIT) */
static volatile uint32_t ap_restarted;
/* the AP leaves its timer's messages in their slot (no EOM): one waits in flight */
static volatile uint32_t ap_hold_timer_slot;
static volatile uint64_t ap_init_simp, ap_init_scontrol, ap_init_sint4, ap_init_stimer0;
/*
 * A vCPU hot-added into the spare slot after the AP was ejected: what it read of the
 * partition's MSRs, the fault its VMCALL took (0: none), its HvPostMessage's status
 */
static volatile uint32_t ap_hot_added, ap_hot_started, ap_hot_vmcall_fault;
static volatile uint32_t ap_hot_post_status = 0xffffffff;
static volatile uint64_t ap_hot_os_id, ap_hot_hypercall, ap_hot_reftsc;

static uint32_t this_apic_id(void)
{
    return *(volatile uint32_t *)(APIC_BASE + 0x20) >> 24;
}

/* a message in one of the AP's SINT slots: count it, free the slot, EOM */
static void ap_take_message(uint32_t sint, volatile uint32_t *count)
{
    volatile struct hv_message *m =
        &((volatile struct hv_message *)AP_SIMP_PAGE)[sint];

    if (!m->type || (sint == TIMER_SINT && ap_hold_timer_slot)) {
        return;
    }
    if (sint == MSG_SINT) {
        ap_msg_type = m->type;
    }
    (*count)++;
    m->type = 0;
    __asm__ volatile("mfence" : : : "memory");
    if (m->flags & HV_MESSAGE_FLAG_PENDING) {
        wrmsr(HV_X64_MSR_EOM, 0);
    }
}

void isr_handler(uint32_t vector)
{
    volatile struct hv_message *m = &msg_page[TIMER_SINT];

    if (vector < 32 || vector == 255) {
        puts_serial("SYNIC-TEST: FAIL unexpected vector ");
        puthex(vector);
        puts_serial(this_apic_id() ? " on the AP\n" : "\n");
        qemu_exit(1);
    }
    if (this_apic_id() != 0) {
        if (vector == TIMER_VECTOR) {
            ap_take_message(TIMER_SINT, &ap_timer_msgs);
        } else if (vector == MSG_VECTOR) {
            ap_take_message(MSG_SINT, &ap_msgs);
        }
        *(volatile uint32_t *)(APIC_BASE + 0xb0) = 0;
        return;
    }
    irq_count[vector]++;
    if (vector == DIRECT_VECTOR) {
        uint64_t now = ref_time();

        if (irq_count[vector] == 1) {
            direct_first = now;
        } else if (now - direct_last < direct_min_gap) {
            direct_min_gap = now - direct_last;
        }
        direct_last = now;
    }
    if (vector == TIMER_VECTOR && m->type == HV_MESSAGE_TIMER_EXPIRED) {
        /* payload: timer index (u32), reserved (u32), expiration, delivery */
        timer_last_exp = *(volatile uint64_t *)&m->payload[8];
        if (timer_msgs < TIMER_LOG) {
            timer_log_index[timer_msgs] = *(volatile uint32_t *)&m->payload[0];
            timer_log_exp[timer_msgs] = timer_last_exp;
            timer_log_delivery[timer_msgs] = *(volatile uint64_t *)&m->payload[16];
        }
        timer_msgs++;
        m->type = 0;
        __asm__ volatile("mfence" : : : "memory");
        if (m->flags & HV_MESSAGE_FLAG_PENDING) {
            wrmsr(HV_X64_MSR_EOM, 0);
        }
    }
    if (vector != no_apic_eoi_vector) {
        *(volatile uint32_t *)(APIC_BASE + 0xb0) = 0;     /* APIC EOI */
    }
}

#define ISR_DECL(n) extern void isr_##n(void)
ISR_DECL(0); ISR_DECL(1); ISR_DECL(2); ISR_DECL(3); ISR_DECL(4);
ISR_DECL(5); ISR_DECL(6); ISR_DECL(7); ISR_DECL(8); ISR_DECL(9);
ISR_DECL(10); ISR_DECL(11); ISR_DECL(12); ISR_DECL(13); ISR_DECL(14);
ISR_DECL(15); ISR_DECL(16); ISR_DECL(17); ISR_DECL(18); ISR_DECL(19);
ISR_DECL(20); ISR_DECL(21); ISR_DECL(22); ISR_DECL(23); ISR_DECL(24);
ISR_DECL(25); ISR_DECL(26); ISR_DECL(27); ISR_DECL(28); ISR_DECL(29);
ISR_DECL(30); ISR_DECL(31); ISR_DECL(80); ISR_DECL(81); ISR_DECL(82);
ISR_DECL(83); ISR_DECL(255);

static void (*const exc_stubs[32])(void) = {
    isr_0, isr_1, isr_2, isr_3, isr_4, isr_5, isr_6, isr_7, isr_8, isr_9,
    isr_10, isr_11, isr_12, isr_13, isr_14, isr_15, isr_16, isr_17, isr_18,
    isr_19, isr_20, isr_21, isr_22, isr_23, isr_24, isr_25, isr_26, isr_27,
    isr_28, isr_29, isr_30, isr_31,
};

static uint64_t idt[256];

static void set_gate(int vec, void (*fn)(void))
{
    uint32_t a = (uint32_t)fn;

    /* 32-bit interrupt gate, DPL 0, selector 0x08 */
    idt[vec] = (uint64_t)(a & 0xffff) | (uint64_t)0x08 << 16 |
               (uint64_t)0x8e00 << 32 | (uint64_t)(a >> 16) << 48;
}

/* this CPU: the shared IDT, its local APIC software-enabled (spurious 0xff) */
static void load_idt_and_apic(void)
{
    struct __attribute__((packed)) {
        uint16_t limit;
        uint32_t base;
    } idtr = { sizeof(idt) - 1, (uint32_t)idt };

    __asm__ volatile("lidt %0" : : "m"(idtr));
    *(volatile uint32_t *)(APIC_BASE + 0xf0) = 0x1ff;
    *(volatile uint32_t *)(APIC_BASE + 0x80) = 0;     /* TPR */
}

/*
 * CPL 3: a TSS for the way back to CPL 0 (its stack: the one an exception from
 * CPL 3 runs on), and a DPL 3 gate on CPL3_RETURN_VECTOR to boot.S's
 * cpl3_return.
 */
#define CPL3_RETURN_VECTOR 0x84
extern uint64_t gdt_tss[];
extern char cpl3_return[];
void run_at_cpl3(void (*fn)(void));
static uint32_t tss[26];
static uint8_t cpl0_fault_stack[4096] __attribute__((aligned(16)));

static void setup_cpl3(void)
{
    uint32_t base = (uint32_t)tss, limit = sizeof(tss) - 1;
    uint32_t a = (uint32_t)cpl3_return;

    tss[1] = (uint32_t)(cpl0_fault_stack + sizeof(cpl0_fault_stack));  /* ESP0 */
    tss[2] = 0x10;                                                      /* SS0 */
    tss[25] = sizeof(tss) << 16;            /* no I/O bitmap */
    /* 32-bit available TSS, DPL 0 */
    gdt_tss[0] = (uint64_t)(limit & 0xffff) | (uint64_t)(base & 0xffffff) << 16 |
                 (uint64_t)0x89 << 40 | (uint64_t)(limit >> 16) << 48 |
                 (uint64_t)(base >> 24) << 56;
    __asm__ volatile("ltr %w0" : : "r"(0x30));
    /* 32-bit interrupt gate, DPL 3 */
    idt[CPL3_RETURN_VECTOR] = (uint64_t)(a & 0xffff) | (uint64_t)0x08 << 16 |
                              (uint64_t)0xee00 << 32 | (uint64_t)(a >> 16) << 48;
}

/* at CPL 3: VMCALL (HvPostMessage's code, an enabled hypercall page) */
static volatile uint32_t cpl3_vmcall_vector = 0xffffffff;
static void cpl3_vmcall(void)
{
    uint32_t eax = 0x005c, edx = 0;

    fault_vector = 0;
    __asm__ volatile("movl $1f, fault_resume\n\t"
                     "vmcall\n"
                     "1:\tmovl $0, fault_resume"
                     : "+a"(eax), "+d"(edx) : "b"(0), "c"(INPUT_PAGE), "D"(0), "S"(0)
                     : "memory", "cc");
    cpl3_vmcall_vector = fault_vector;
    __asm__ volatile("int $0x84");
}

/*
 * A nested guest under TCG's SVM emulation: VMRUN with a VMCB whose guest runs
 * in this flat 32-bit address space and executes VMCALL. VMCALL is Intel's:
 * in an AMD guest it is #UD, which this VMCB intercepts, so the nested guest's
 * VMCALL must come back here as a #UD exit, and never reach our hypervisor's
 * hypercall handler (which would post the message in the input page and let
 * the guest run on to its HLT, intercepted too).
 */
#define VMCB_PAGE           0x208000
#define HSAVE_PAGE          0x209000
#define MSR_EFER            0xC0000080
#define MSR_VM_HSAVE_PA     0xC0010117
#define EFER_SVME           (1u << 12)
#define CPUID_SVM           (1u << 2)       /* CPUID 0x80000001 ECX */
/* target/i386/svm.h: the VMCB's offsets, and exit codes */
#define VMCB_INTERCEPT_EXC  0x008
#define VMCB_INTERCEPT      0x00c           /* bit n: exit code 0x60 + n */
#define VMCB_ASID           0x058
#define VMCB_EXIT_CODE      0x070
#define VMCB_SAVE           0x400           /* segments: 16 bytes each */
#define VMCB_CPL            0x4cb
#define VMCB_EFER           0x4d0
#define VMCB_CR4            0x548
#define VMCB_CR3            0x550
#define VMCB_CR0            0x558
#define VMCB_RFLAGS         0x570
#define VMCB_RIP            0x578
#define VMCB_RSP            0x5d8
#define SVM_EXIT_EXCP_BASE  0x40
#define SVM_EXIT_HLT        0x78
#define SVM_EXIT_VMRUN      0x80
/* flat 32-bit segments, as the VMCB keeps attributes: type, S, DPL, P, AVL/L/DB/G */
#define VMCB_CODE32         0xc9b
#define VMCB_DATA32         0xc93

static uint8_t nested_stack[1024] __attribute__((aligned(16)));
extern char nested_vmcall[];

static void nested_guest(void)
{
    __asm__ volatile(".globl nested_vmcall\n"
                     "nested_vmcall:\tvmcall\n\t"
                     "hlt" : : "a"(0x005c), "d"(0), "b"(0), "c"(INPUT_PAGE),
                     "D"(0), "S"(0));
}

static void vmcb_seg(uint32_t off, uint16_t sel, uint16_t attrib)
{
    volatile uint8_t *v = (volatile uint8_t *)VMCB_PAGE + VMCB_SAVE + off * 16;

    *(volatile uint16_t *)v = sel;
    *(volatile uint16_t *)(v + 2) = attrib;
    *(volatile uint32_t *)(v + 4) = 0xffffffff;
    *(volatile uint64_t *)(v + 8) = 0;
}

/* the exit code of the nested guest's first exit, or 0 without SVM */
static uint64_t run_nested_vmcall(void)
{
    volatile uint8_t *v = (volatile uint8_t *)VMCB_PAGE;
    uint32_t a, b, c, d, cr0, cr3, cr4, i, vmcb = VMCB_PAGE;

    cpuid(0x80000001, &a, &b, &c, &d);
    if (!(c & CPUID_SVM))
        return 0;
    for (i = 0; i < 4096; i++)
        v[i] = 0;
    wrmsr(MSR_EFER, rdmsr(MSR_EFER) | EFER_SVME);
    wrmsr(MSR_VM_HSAVE_PA, HSAVE_PAGE);
    *(volatile uint32_t *)(v + VMCB_INTERCEPT_EXC) = 1u << UD_VECTOR;
    *(volatile uint64_t *)(v + VMCB_INTERCEPT) =
        1ull << (SVM_EXIT_HLT - 0x60) | 1ull << (SVM_EXIT_VMRUN - 0x60);
    *(volatile uint32_t *)(v + VMCB_ASID) = 1;
    vmcb_seg(0, 0x10, VMCB_DATA32);         /* es */
    vmcb_seg(1, 0x08, VMCB_CODE32);         /* cs */
    vmcb_seg(2, 0x10, VMCB_DATA32);         /* ss */
    vmcb_seg(3, 0x10, VMCB_DATA32);         /* ds */
    __asm__ volatile("mov %%cr0, %0; mov %%cr3, %1; mov %%cr4, %2"
                     : "=r"(cr0), "=r"(cr3), "=r"(cr4));
    v[VMCB_CPL] = 0;
    *(volatile uint64_t *)(v + VMCB_EFER) = rdmsr(MSR_EFER);
    *(volatile uint64_t *)(v + VMCB_CR0) = cr0;
    *(volatile uint64_t *)(v + VMCB_CR3) = cr3;
    *(volatile uint64_t *)(v + VMCB_CR4) = cr4;
    *(volatile uint64_t *)(v + VMCB_RFLAGS) = 2;        /* IF clear */
    *(volatile uint64_t *)(v + VMCB_RIP) = (uint32_t)nested_guest;
    *(volatile uint64_t *)(v + VMCB_RSP) =
        (uint32_t)(nested_stack + sizeof(nested_stack));
    /*
     * VMRUN keeps only RAX, RSP and the control state in the host save area:
     * the other registers come back with the nested guest's values. #VMEXIT
     * clears GIF, which STGI sets again.
     */
    __asm__ volatile("push %%ebp\n\tpush %%ebx\n\tpush %%esi\n\tpush %%edi\n\t"
                     "vmrun\n\t"
                     "pop %%edi\n\tpop %%esi\n\tpop %%ebx\n\tpop %%ebp\n\t"
                     "stgi"
                     : "+a"(vmcb) : : "ecx", "edx", "memory", "cc");
    wrmsr(MSR_EFER, rdmsr(MSR_EFER) & ~EFER_SVME);
    return *(volatile uint64_t *)(v + VMCB_EXIT_CODE);
}

static void setup_interrupts(void)
{
    int i;

    for (i = 0; i < 256; i++) {
        set_gate(i, i < 32 ? exc_stubs[i] : isr_255);
    }
    set_gate(MSG_VECTOR, isr_80);
    set_gate(EVT_VECTOR, isr_81);
    set_gate(TIMER_VECTOR, isr_82);
    set_gate(DIRECT_VECTOR, isr_83);
    /* mask the 8259s */
    outb(0x21, 0xff);
    outb(0xa1, 0xff);
    load_idt_and_apic();
    __asm__ volatile("sti");
}

/*
 * The AP (VP 1), started by start_ap(): its own SynIC and message page, its
 * own synthetic timer 0 (periodic, 1 ms, message mode on SINT4); then it
 * serves the BSP's requests to post a message to VP 0.
 */
void ap_main(void);
void ap_main(void)
{
    load_idt_and_apic();
    if (ap_hot_added) {
        /* a new vCPU: the partition's MSRs are the ones VP 0 set long ago */
        ap_hot_os_id = rdmsr(HV_X64_MSR_GUEST_OS_ID);
        ap_hot_hypercall = rdmsr(HV_X64_MSR_HYPERCALL);
        ap_hot_reftsc = rdmsr(HV_X64_MSR_REFERENCE_TSC);
        ap_hot_vmcall_fault = vmcall_fault(0x0099);
        if (!ap_hot_vmcall_fault) {
            ap_hot_post_status = post_message_tsc(AP_INPUT_PAGE, 0x1242, 'H');
        }
        ap_hot_started = 1;
        for (;;) {
            __asm__ volatile("pause");
        }
    }
    if (ap_started) {
        /* INIT-SIPI again: the SynIC and the timer must have been kept */
        ap_init_simp = rdmsr(HV_X64_MSR_SIMP);
        ap_init_scontrol = rdmsr(HV_X64_MSR_SCONTROL);
        ap_init_sint4 = rdmsr(HV_X64_MSR_SINT0 + TIMER_SINT);
        ap_init_stimer0 = rdmsr(HV_X64_MSR_STIMER0_CONFIG);
        __asm__ volatile("sti");
        /*
         * INIT reset the local APIC: an expiry message whose interrupt was
         * pending then is still in its slot, and later ones wait behind it for
         * an EOM. Take it, as a guest bringing a CPU back up would.
         */
        ap_take_message(TIMER_SINT, &ap_timer_msgs);
        ap_restarted = 1;
        for (;;) {
            __asm__ volatile("pause");
        }
    }
    ap_vp_index = rdmsr(HV_X64_MSR_VP_INDEX);
    wrmsr(HV_X64_MSR_SIMP, AP_SIMP_PAGE | 1);
    wrmsr(HV_X64_MSR_SIEFP, AP_SIEFP_PAGE | 1);
    wrmsr(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR);
    wrmsr(HV_X64_MSR_SINT0 + TIMER_SINT, TIMER_VECTOR);
    wrmsr(HV_X64_MSR_SCONTROL, 1);
    __asm__ volatile("sti");
    wrmsr(HV_X64_MSR_STIMER0_COUNT, 10000);
    wrmsr(HV_X64_MSR_STIMER0_CONFIG, (uint64_t)TIMER_SINT << 16 | 2 | 1);
    ap_started = 1;
    for (;;) {
        if (ap_post_request) {
            ap_post_status = post_message_tsc(AP_INPUT_PAGE, 0x1241, 'P');
            ap_post_request = 0;
            ap_posts_done++;
        }
        __asm__ volatile("pause");
    }
}

/*
 * CPU hot-unplug, as a guest's ACPI code ejects a CPU: PIIX4's CPU hotplug
 * registers (-M pc), switched from the legacy to the modern interface by a 0
 * written at the legacy bitmap's start (hw/acpi/cpu_hotplug.c); then the CPU
 * selector and its flags: bit 0 reads "present", bit 3 written ejects it.
 */
#define CPUHP_PORT          0xaf00
#define CPUHP_SELECTOR      0
#define CPUHP_FLAGS         4
#define CPUHP_PRESENT       1
#define CPUHP_EJECT         8

/* whether a CPU is present, as the ACPI CPU hotplug registers say */
static int cpu_present(uint32_t cpu)
{
    outl(CPUHP_PORT + CPUHP_SELECTOR, cpu);
    return inb(CPUHP_PORT + CPUHP_FLAGS) & CPUHP_PRESENT;
}

/* eject an AP: 1 if it was there before and is gone after */
static int eject_ap(uint32_t cpu)
{
    int present;

    outb(CPUHP_PORT, 0);
    outl(CPUHP_PORT + CPUHP_SELECTOR, cpu);
    present = inb(CPUHP_PORT + CPUHP_FLAGS) & CPUHP_PRESENT;
    outb(CPUHP_PORT + CPUHP_FLAGS, CPUHP_EJECT);
    return present && !(inb(CPUHP_PORT + CPUHP_FLAGS) & CPUHP_PRESENT);
}

extern char ap_tramp_start[], ap_tramp_end[];

/* INIT, then two SIPIs, to an AP: it starts at AP_TRAMPOLINE in real mode */
static void start_ap(uint32_t apic_id)
{
    volatile uint32_t *icr_lo = (volatile uint32_t *)(APIC_BASE + 0x300);
    volatile uint32_t *icr_hi = (volatile uint32_t *)(APIC_BASE + 0x310);
    char *dst = (char *)AP_TRAMPOLINE;
    const char *src;
    uint64_t t;
    int i;

    for (src = ap_tramp_start; src < ap_tramp_end; src++) {
        *dst++ = *src;
    }
    *icr_hi = apic_id << 24;
    *icr_lo = 0x4500;                           /* INIT, assert */
    for (t = ref_time() + 100000; ref_time() < t;) {
        __asm__ volatile("pause");
    }
    for (i = 0; i < 2; i++) {
        *icr_hi = apic_id << 24;
        *icr_lo = 0x4600 | (AP_TRAMPOLINE >> 12);   /* SIPI */
        for (t = ref_time() + 10000; ref_time() < t;) {
            __asm__ volatile("pause");
        }
    }
}

static void long_mode_test(void);
static void finish(void);

/* hyperv-testdev's connection MSG_CONN to VP 0's SINT2; the SINT2 count so far */
static uint32_t synic_only_connect(void)
{
    outl(TESTDEV_PORT, MSG_CONN << 24 | TESTDEV_MSG_CONN_CREATE << 16 |
         0 << 8 | MSG_SINT);
    return irq_count[MSG_VECTOR];
}

/* post a message and wait for SINT2's interrupt count to reach `want` */
static int synic_only_post(uint32_t type, char fill, uint32_t want)
{
    return post_message_tsc(INPUT_PAGE, type, fill) == 0 &&
        wait_count_tsc(&irq_count[MSG_VECTOR], want);
}

/*
 * The SynIC alone (-cpu ...,hv-vpindex,hv-synic; SYNIC_ONLY_FILE in fw_cfg),
 * so that the timers' migration subsection (cpu/hyperv_tcg) is not sent: a
 * SINT with AutoEOI across save and restore. The handler does not EOI the
 * local APIC for MSG_VECTOR; in the restored QEMU two messages in a row must
 * both interrupt, which they do only if the APIC still EOIs that vector as
 * it accepts it (its auto-EOI vectors are rebuilt from the loaded SINTs).
 */
static void synic_only_test(void)
{
    volatile struct hv_message *m = &msg_page[MSG_SINT];
    uint32_t a, b, c, d, i;
    uint64_t end;

    cpuid(0x40000003, &a, &b, &c, &d);
    check((a & 0x64) == 0x64 && !(a & 0x0a), "synic-only: CPUID 0x40000003.EAX: "
          "hypercall, VP index, SynIC; no reference counter, no timers");
    wrmsr(HV_X64_MSR_GUEST_OS_ID, 0x8100000000000000ull);
    wrmsr(HV_X64_MSR_HYPERCALL, HYPERCALL_PAGE | 1);
    wrmsr(HV_X64_MSR_SIMP, SIMP_PAGE | 1);
    wrmsr(HV_X64_MSR_SIEFP, SIEFP_PAGE | 1);
    wrmsr(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR | 1 << 17);   /* AutoEOI */
    wrmsr(HV_X64_MSR_SCONTROL, 1);
    /* without hv-enforce-cpuid, as KVM: an MSR not offered is no fault */
    check(rdmsr_fault(HV_X64_MSR_TSC_FREQUENCY) == 0 &&
          wrmsr_fault(HV_X64_MSR_APIC_ASSIST_PAGE, 0) == 0,
          "synic-only: without hv-enforce-cpuid, MSRs not offered (frequency, "
          "VP assist page) are no fault");
    setup_interrupts();
    no_apic_eoi_vector = MSG_VECTOR;
    a = synic_only_connect();
    check(synic_only_post(0x1250, 'S', a + 1), "synic-only: an AutoEOI SINT's "
          "message interrupts before the save");
    m->type = 0;
    wrmsr(HV_X64_MSR_EOM, 0);

    puts_serial("SYNIC-TEST: save now\n");
    for (end = rdtsc() + SAVE_WAIT_TSC; !fw_cfg_has_file(RESTORED_FILE) && rdtsc() < end;) {
        for (i = 0; i < 100000; i++) {
            __asm__ volatile("pause");
        }
    }
    check(fw_cfg_has_file(RESTORED_FILE), "synic-only: the guest runs on in "
          "the restoring QEMU");
    check(rdmsr(HV_X64_MSR_SINT0 + MSG_SINT) == (MSG_VECTOR | 1 << 17),
          "synic-only: the AutoEOI SINT reads as it was saved");
    /* hyperv-testdev keeps no migrated state: connect again */
    a = synic_only_connect();
    check(synic_only_post(0x1251, 'T', a + 1), "synic-only: after the restore, "
          "a message interrupts");
    m->type = 0;
    wrmsr(HV_X64_MSR_EOM, 0);
    check(synic_only_post(0x1252, 'U', a + 2),
          "synic-only: after the restore, the next one interrupts too, with no "
          "APIC EOI for the first (AutoEOI kept)");
    no_apic_eoi_vector = 0;
    finish();
}

void main(void);
void main(void)
{
    uint32_t a, b, c, d;
    volatile uint8_t *hc = (volatile uint8_t *)HYPERCALL_PAGE;
    volatile struct hv_message *m = &msg_page[MSG_SINT];
    uint64_t t, t0, t1, status;

    puts_serial("SYNIC-TEST: start\n");
    if (fw_cfg_has_file(SYNIC_ONLY_FILE)) {
        synic_only_test();
    }

    /* CPUID */
    cpuid(0x40000000, &a, &b, &c, &d);
    check(a >= 0x40000005 && b == 0x7263694d && c == 0x666f736f &&
          d == 0x76482074, "CPUID 0x40000000: Microsoft Hv, max >= 5");
    cpuid(0x40000003, &a, &b, &c, &d);
    check((a & 0x6e) == 0x6e, "CPUID 0x40000003.EAX: hypercall, vp index, "
          "time ref count, synic, stimer");
    check((b & 0x30) == 0x30, "CPUID 0x40000003.EBX: post messages, "
          "signal events");
    cpuid(0x40000004, &a, &b, &c, &d);
    check(a & (1 << 9), "CPUID 0x40000004.EAX: deprecating AEOI");
    /* -cpu ...,+invtsc: the invariant TSC the test asks for (0x80000007.EDX[8]) */
    cpuid(0x80000007, &a, &b, &c, &d);
    check(d & (1 << 8), "CPUID 0x80000007.EDX: invariant TSC, as asked for");

    /* hypercall page */
    wrmsr(HV_X64_MSR_GUEST_OS_ID, 0x8100000000000000ull);
    wrmsr(HV_X64_MSR_HYPERCALL, HYPERCALL_PAGE | 1);
    check((rdmsr(HV_X64_MSR_HYPERCALL) & 1) == 1, "hypercall page enabled");
    check(hc[0] == 0x0f && hc[1] == 0x01 && hc[2] == 0xc1 && hc[3] == 0xc3,
          "hypercall page holds VMCALL; RET");
    check(rdmsr(HV_X64_MSR_VP_INDEX) == 0, "VP index of the BSP is 0");
    t0 = ref_time();
    for (a = 0; a < 100000; a++) {
        __asm__ volatile("pause");
    }
    t1 = ref_time();
    check(t1 > t0, "reference time counter advances");
    status = hypercall(0x0099, 0, 0);
    check((status & 0xffff) == 2, "unknown hypercall: invalid code");

    /* SynIC */
    wrmsr(HV_X64_MSR_SIMP, SIMP_PAGE | 1);
    wrmsr(HV_X64_MSR_SIEFP, SIEFP_PAGE | 1);
    wrmsr(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR);
    wrmsr(HV_X64_MSR_SINT0 + EVT_SINT, EVT_VECTOR);
    wrmsr(HV_X64_MSR_SINT0 + TIMER_SINT, TIMER_VECTOR);
    wrmsr(HV_X64_MSR_SCONTROL, 1);
    check(rdmsr(HV_X64_MSR_SVERSION) == 1, "SVERSION is 1");
    check(rdmsr(HV_X64_MSR_SINT0 + MSG_SINT) == MSG_VECTOR, "SINT2 reads back");
    check(rdmsr(HV_X64_MSR_SINT0) & (1 << 16), "SINT0 masked after reset");
    setup_interrupts();

    outl(TESTDEV_PORT, MSG_CONN << 24 | TESTDEV_MSG_CONN_CREATE << 16 |
         0 << 8 | MSG_SINT);
    outl(TESTDEV_PORT, EVT_CONN << 24 | TESTDEV_EVT_CONN_CREATE << 16 |
         0 << 8 | EVT_SINT);

    /* message delivery */
    check(post_message(0x1234, 'A') == 0, "HvPostMessage A: success");
    check(wait_count(&irq_count[MSG_VECTOR], 1), "message A: SINT2 interrupt");
    check(m->type == 0x1234 && m->payload_size == 16 && m->payload[0] == 'A',
          "message A in the SINT2 slot");

    /* slot busy: the next message waits for EOM */
    check(post_message(0x1235, 'B') == 0, "HvPostMessage B: success");
    t0 = ref_time() + 20000000;
    while (!(m->flags & HV_MESSAGE_FLAG_PENDING) && ref_time() < t0) {
        __asm__ volatile("pause");
    }
    check(m->flags & HV_MESSAGE_FLAG_PENDING, "message B: pending flag set "
          "in the busy slot");
    t0 = ref_time() + 2000000;
    while (ref_time() < t0) {
        __asm__ volatile("pause");
    }
    check(irq_count[MSG_VECTOR] == 1 && m->type == 0x1234,
          "message B: not delivered while the slot is busy");
    m->type = 0;
    __asm__ volatile("mfence" : : : "memory");
    wrmsr(HV_X64_MSR_EOM, 0);
    check(wait_count(&irq_count[MSG_VECTOR], 2), "message B: SINT2 interrupt "
          "after EOM");
    check(m->type == 0x1235 && m->payload[0] == 'B' &&
          !(m->flags & HV_MESSAGE_FLAG_PENDING),
          "message B in the SINT2 slot after EOM");
    m->type = 0;
    wrmsr(HV_X64_MSR_EOM, 0);

    /* masked SINT: the message waits in its slot, raised on unmask */
    wrmsr(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR | 1 << 16);
    a = irq_count[MSG_VECTOR];
    check(post_message(0x1236, 'C') == 0, "HvPostMessage C to a masked "
          "SINT: success");
    t0 = ref_time() + 20000000;
    while (m->type != 0x1236 && ref_time() < t0) {
        __asm__ volatile("pause");
    }
    t0 = ref_time() + 2000000;
    while (ref_time() < t0) {
        __asm__ volatile("pause");
    }
    check(m->type == 0x1236 && irq_count[MSG_VECTOR] == a,
          "message C: in the slot, no interrupt while the SINT is masked");
    wrmsr(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR);
    check(wait_count(&irq_count[MSG_VECTOR], a + 1), "message C: SINT2 "
          "interrupt once the SINT is unmasked");
    m->type = 0;
    wrmsr(HV_X64_MSR_EOM, 0);

    /* auto-EOI: the handler does not EOI the APIC, the next one comes */
    wrmsr(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR | 1 << 17);
    no_apic_eoi_vector = MSG_VECTOR;
    a = irq_count[MSG_VECTOR];
    check(post_message(0x1237, 'D') == 0 &&
          wait_count(&irq_count[MSG_VECTOR], a + 1),
          "auto-EOI SINT: message D interrupt");
    m->type = 0;
    wrmsr(HV_X64_MSR_EOM, 0);
    check(post_message(0x1238, 'E') == 0 &&
          wait_count(&irq_count[MSG_VECTOR], a + 2),
          "auto-EOI SINT: message E interrupt without an APIC EOI for D");
    m->type = 0;
    wrmsr(HV_X64_MSR_EOM, 0);
    no_apic_eoi_vector = 0;
    wrmsr(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR);
    if (irq_count[MSG_VECTOR] < a + 2) {
        /* the vector is stuck in service: EOI it for what follows */
        *(volatile uint32_t *)(APIC_BASE + 0xb0) = 0;
    }

    /*
     * Negative cases, as KVM and Hyper-V have them: read-only MSRs and an
     * unmasked SINT on a vector below 16 are #GP (and change nothing);
     * VMCALL with the hypercall page disabled is #UD, not a hypercall.
     */
    check(wrmsr_fault(HV_X64_MSR_VP_INDEX, 5) == GP_VECTOR &&
          rdmsr(HV_X64_MSR_VP_INDEX) == 0, "WRMSR VP_INDEX (read-only): #GP");
    check(wrmsr_fault(HV_X64_MSR_SVERSION, 2) == GP_VECTOR &&
          rdmsr(HV_X64_MSR_SVERSION) == 1, "WRMSR SVERSION (read-only): #GP");
    check(wrmsr_fault(HV_X64_MSR_SINT0 + MSG_SINT, 5) == GP_VECTOR &&
          rdmsr(HV_X64_MSR_SINT0 + MSG_SINT) == MSG_VECTOR,
          "WRMSR SINT2, unmasked vector 5: #GP, the SINT unchanged");
    check(wrmsr_fault(HV_X64_MSR_SINT0 + MSG_SINT, 5 | 1 << 16) == 0 &&
          wrmsr_fault(HV_X64_MSR_SINT0 + MSG_SINT, MSG_VECTOR) == 0,
          "WRMSR SINT2, masked vector 5: accepted");
    /*
     * With hv-enforce-cpuid, an MSR of an enlightenment the CPU model does not
     * offer is #GP (here hv-reset's; synic_only_test() reads MSRs not offered
     * without hv-enforce-cpuid: no fault there); the EOI MSR is write-only.
     */
    check(rdmsr_fault(HV_X64_MSR_RESET) == GP_VECTOR,
          "RDMSR RESET without hv-reset (hv-enforce-cpuid): #GP");
    check(wrmsr_fault(HV_X64_MSR_RESET, 0) == GP_VECTOR,
          "WRMSR RESET without hv-reset (hv-enforce-cpuid): #GP");
    check(rdmsr(HV_X64_MSR_TSC_FREQUENCY) != 0,
          "TSC_FREQUENCY (hv-frequencies): a rate");
    check(rdmsr_fault(HV_X64_MSR_EOI) == GP_VECTOR,
          "RDMSR EOI (write-only, hv-vapic): #GP");
    check(rdmsr_fault(HV_X64_MSR_APIC_ASSIST_PAGE) == 0,
          "RDMSR APIC_ASSIST_PAGE (hv-vapic): no fault");
    b = rdmsr(HV_X64_MSR_HYPERCALL);
    wrmsr(HV_X64_MSR_HYPERCALL, b & ~1u);
    check(vmcall_fault(0xffff) == UD_VECTOR,
          "VMCALL with the hypercall page disabled: #UD");
    wrmsr(HV_X64_MSR_HYPERCALL, b);
    check(vmcall_fault(0xffff) == 0, "VMCALL with the hypercall page enabled: "
          "no fault");
    /* Locked: the MSR is immutable (until a reset): neither disabled nor moved */
    wrmsr(HV_X64_MSR_HYPERCALL, b | HV_HYPERCALL_LOCKED);
    wrmsr(HV_X64_MSR_HYPERCALL, b & ~1u);
    wrmsr(HV_X64_MSR_HYPERCALL, SPARE_PAGE | 1);
    check(rdmsr(HV_X64_MSR_HYPERCALL) == (b | HV_HYPERCALL_LOCKED) &&
          vmcall_fault(0xffff) == 0 && *(volatile uint8_t *)SPARE_PAGE != 0x0f,
          "hypercall MSR locked: a write that disables or moves the page "
          "changes nothing");
    setup_cpl3();
    a = irq_count[MSG_VECTOR];
    run_at_cpl3(cpl3_vmcall);
    check(cpl3_vmcall_vector == UD_VECTOR && irq_count[MSG_VECTOR] == a,
          "VMCALL at CPL 3 with the hypercall page enabled: #UD, no hypercall");
    a = irq_count[MSG_VECTOR];
    b = run_nested_vmcall();
    check(b == SVM_EXIT_EXCP_BASE + UD_VECTOR &&
          *(volatile uint64_t *)(VMCB_PAGE + VMCB_RIP) == (uint32_t)nested_vmcall &&
          !wait_count(&irq_count[MSG_VECTOR], a + 1),
          "VMCALL in a nested SVM guest: a #UD exit at the VMCALL, no hypercall");
    if (b != SVM_EXIT_EXCP_BASE + UD_VECTOR) {
        puts_serial("    nested guest's exit code: ");
        puthex(b);
        puts_serial(" rip ");
        puthex(*(volatile uint64_t *)(VMCB_PAGE + VMCB_RIP));
        puts_serial(" msgs ");
        puthex(irq_count[MSG_VECTOR] - a);
        puts_serial("\n");
    }

    /* HvSignalEvent, fast: connection id in EBX:ECX */
    status = hypercall(0x005d | 1 << 16, EVT_CONN, 0);
    check((status & 0xffff) == 0, "HvSignalEvent: success");
    check(wait_count(&irq_count[EVT_VECTOR], 1), "event: SINT3 interrupt");
    check(evt_page[EVT_SINT * 64] & (1u << EVT_CONN),
          "event: flag 2 set in the SINT3 event flags");
    status = hypercall(0x005d | 1 << 16, 7, 0);
    check((status & 0xffff) == 18, "HvSignalEvent on an unknown connection: "
          "invalid connection id");
    /*
     * The hypercall input value's other fields: a simple call given a rep
     * count, a rep start index or a variable header size, or any reserved bit
     * set, is invalid input, and does nothing (without them the same call
     * signals the event: above).
     */
    evt_page[EVT_SINT * 64] &= ~(1u << EVT_CONN);
    a = irq_count[EVT_VECTOR];
    check((hypercall(0x005d | 1 << 16 | 1ull << 32, EVT_CONN, 0) & 0xffff) == 3,
          "HvSignalEvent with a rep count: invalid input");
    check((hypercall(0x005d | 1 << 16 | 1ull << 48, EVT_CONN, 0) & 0xffff) == 3,
          "HvSignalEvent with a rep start index: invalid input");
    check((hypercall(0x005d | 1 << 16 | 1 << 17, EVT_CONN, 0) & 0xffff) == 3,
          "HvSignalEvent with a variable header size: invalid input");
    check((hypercall(0x005d | 1 << 16 | 1 << 27, EVT_CONN, 0) & 0xffff) == 3 &&
          (hypercall(0x005d | 1 << 16 | 1ull << 46, EVT_CONN, 0) & 0xffff) == 3 &&
          (hypercall(0x005d | 1 << 16 | 1ull << 63, EVT_CONN, 0) & 0xffff) == 3,
          "HvSignalEvent with reserved bits 27, 46 or 63: invalid input");
    check(!wait_count(&irq_count[EVT_VECTOR], a + 1) &&
          !(evt_page[EVT_SINT * 64] & (1u << EVT_CONN)),
          "no invalid HvSignalEvent signalled the event (flag clear, no SINT)");
    /* hv-spinlocks tells the guest to notify: HvNotifyLongSpinWait, fast */
    check((hypercall(0x0008 | 1 << 16, 0x1fff, 0) & 0xffff) == 0,
          "HvNotifyLongSpinWait: success");

    /* synthetic timer 0, periodic, 1ms, message mode on SINT4 */
    wrmsr(HV_X64_MSR_STIMER0_COUNT, 10000);
    wrmsr(HV_X64_MSR_STIMER0_CONFIG, (uint64_t)TIMER_SINT << 16 | 2 | 1);
    check(wait_count(&timer_msgs, 20), "stimer0: 20 periodic "
          "HVMSG_TIMER_EXPIRED messages on SINT4");
    wrmsr(HV_X64_MSR_STIMER0_CONFIG, 0);
    {
        /*
         * The payloads: timer 0, each delivered at or after its expiration,
         * and expirations one period apart: more where TCG missed periods
         * (they are not made up for), never less, and exactly one period at
         * least once (a wrong period has no such gap).
         */
        uint64_t gap, min_gap = ~0ull;
        int bad_index = 0, early = 0;

        for (b = 0; b < 20; b++) {
            bad_index += timer_log_index[b] != 0;
            early += timer_log_delivery[b] < timer_log_exp[b];
            if (b) {
                gap = timer_log_exp[b] - timer_log_exp[b - 1];
                min_gap = gap < min_gap ? gap : min_gap;
            }
        }
        check(!bad_index, "stimer0 periodic: every payload names timer 0");
        check(!early, "stimer0 periodic: delivered at or after the expiration");
        if (min_gap != 10000) {
            puts_serial("SYNIC-TEST: shortest gap between expirations ");
            puthex(min_gap);
            puts_serial("\n");
        }
        check(min_gap == 10000, "stimer0 periodic: expirations one 1 ms period "
              "apart (never less, more only for missed periods)");
    }

    /* one-shot, auto-enable, absolute expiration time */
    a = timer_msgs;
    wrmsr(HV_X64_MSR_STIMER0_CONFIG, (uint64_t)TIMER_SINT << 16 | 8);
    wrmsr(HV_X64_MSR_STIMER0_COUNT, ref_time() + 20000);
    check(wait_count(&timer_msgs, a + 1), "stimer0: one-shot expiry");
    t0 = ref_time() + 1000000;
    while (ref_time() < t0) {
        __asm__ volatile("pause");
    }
    check(timer_msgs == a + 1 &&
          !(rdmsr(HV_X64_MSR_STIMER0_CONFIG) & 1),
          "stimer0: one-shot fires once and disables itself");

    /*
     * An expiration time at the far end of the reference time: QEMU's virtual
     * clock (ns) cannot hold it, and exp_time * 100 must not wrap around into
     * the past. It stays armed and does not fire.
     */
    a = timer_msgs;
    wrmsr(HV_X64_MSR_STIMER0_CONFIG, (uint64_t)TIMER_SINT << 16 | 8);
    wrmsr(HV_X64_MSR_STIMER0_COUNT, 0xfffffffffffff000ull);
    for (t0 = ref_time() + 500000; ref_time() < t0;) {
        __asm__ volatile("pause");
    }
    check(timer_msgs == a && (rdmsr(HV_X64_MSR_STIMER0_CONFIG) & 1),
          "stimer0: a one-shot at the far end of reference time stays armed, "
          "no expiry");
    wrmsr(HV_X64_MSR_STIMER0_CONFIG, 0);

    /*
     * A one-shot timer reprogrammed while its expiry message waits for EOM
     * (the slot is busy, interrupts are off): as with KVM the stale expiry is
     * dropped, but the expiry of the new programming, which comes before the
     * EOM, must still be delivered once the guest writes EOM. Linux's
     * clockevent in message mode waits for exactly that message.
     */
    {
        volatile struct hv_message *tm = &msg_page[TIMER_SINT];
        uint64_t second;

        __asm__ volatile("cli");
        tm->type = 0x4242;                      /* the slot is busy */
        a = timer_msgs;
        wrmsr(HV_X64_MSR_STIMER0_CONFIG, (uint64_t)TIMER_SINT << 16 | 8);
        wrmsr(HV_X64_MSR_STIMER0_COUNT, ref_time() + 10000);
        t0 = ref_time() + 20000000;
        while (!(tm->flags & HV_MESSAGE_FLAG_PENDING) && ref_time() < t0) {
            __asm__ volatile("pause");
        }
        check(tm->flags & HV_MESSAGE_FLAG_PENDING, "stimer0: a one-shot "
              "expiry finds the slot busy and sets the pending flag");
        second = ref_time() + 10000;
        wrmsr(HV_X64_MSR_STIMER0_COUNT, second);
        t0 = ref_time() + 200000;               /* 20 ms: past the 2nd expiry */
        while (ref_time() < t0) {
            __asm__ volatile("pause");
        }
        tm->type = 0;
        tm->flags = 0;
        __asm__ volatile("mfence" : : : "memory");
        wrmsr(HV_X64_MSR_EOM, 0);
        __asm__ volatile("sti");
        check(wait_count(&timer_msgs, a + 1) && timer_last_exp == second,
              "stimer0: reprogrammed while its expiry waited for EOM, the "
              "new expiry comes after EOM");
        t0 = ref_time() + 200000;
        while (ref_time() < t0) {
            __asm__ volatile("pause");
        }
        check(timer_msgs <= a + 1, "stimer0: the stale expiry is not "
              "delivered as well");
    }

    /* reference TSC page: scale and offset against the time ref counter */
    {
        struct hv_ref_tsc_page *pg = (struct hv_ref_tsc_page *)TSC_PAGE;

        cpuid(0x40000003, &a, &b, &c, &d);
        check(a & (1 << 9), "CPUID 0x40000003.EAX: reference TSC page");
        wrmsr(HV_X64_MSR_REFERENCE_TSC, TSC_PAGE | 1);
        check(rdmsr(HV_X64_MSR_REFERENCE_TSC) == (TSC_PAGE | 1),
              "reference TSC MSR reads back");
        check(pg->sequence != 0 && pg->sequence != 0xffffffff && pg->scale,
              "reference TSC page: valid sequence and a scale");
        check(tsc_page_in_range(), "reference TSC page time lies between two "
              "reads of the time reference counter (100 reads)");
        check(ref_time_agrees_with_pm_timer("before the save"),
              "reference time runs at the ACPI PM timer's rate (within 2 %)");
    }

    /* synthetic timer 1, direct mode, periodic on DIRECT_VECTOR */
    cpuid(0x40000003, &a, &b, &c, &d);
    check(d & (1 << 19), "CPUID 0x40000003.EDX: stimer direct mode");
    a = timer_msgs;
    wrmsr(HV_X64_MSR_STIMER1_COUNT, DIRECT_PERIOD);
    wrmsr(HV_X64_MSR_STIMER1_CONFIG,
          1 << 12 | DIRECT_VECTOR << 4 | 2 | 1);
    check(wait_count(&irq_count[DIRECT_VECTOR], 21), "stimer1 direct: 21 "
          "periodic interrupts on its vector");
    wrmsr(HV_X64_MSR_STIMER1_CONFIG, 0);
    /*
     * The period, from the handler's reads of reference time: the 20
     * periods between the first and the last interrupt take at least 19 of
     * them (the first interrupt's handler may run up to a period late), and
     * some two interrupts came less than 1.5 periods apart (a period twice
     * as long, or in the wrong unit, has none). Load makes interrupts late,
     * never early, and no upper bound on the total is needed. A period of
     * 1 ms failed both under a loaded CI host (handlers a millisecond late).
     */
    t0 = direct_last - direct_first;
    check(t0 >= 19 * DIRECT_PERIOD && direct_min_gap < DIRECT_PERIOD * 3 / 2,
          "stimer1 direct: 20 periods take 19 or more of reference time, and "
          "the shortest gap is under 1.5 periods");
    check(timer_msgs == a && msg_page[TIMER_SINT].type == 0,
          "stimer1 direct: no timer message posted");

    /*
     * Save and restore, as virsh save/restore and migration do it: once the
     * guest says "save now", the test script migrates this QEMU to a file
     * (QMP "migrate") and a new QEMU process restores it (-incoming) with
     * RESTORED_FILE in fw_cfg. Both timers run across it, message-mode
     * stimer0 and direct-mode stimer1, 1 ms periodic. In the restored QEMU
     * the Hyper-V MSRs read as they did (the TSC frequency too: the restoring
     * QEMU measures its own), the reference time never went back,
     * both timers fire again, the hypercall page still works, a message
     * reaches the SINT2 slot (the SynIC's pages are mapped again) and the
     * TSC page still agrees with the time reference counter.
     */
    {
        static const uint32_t kept_msrs[] = {
            HV_X64_MSR_GUEST_OS_ID, HV_X64_MSR_HYPERCALL, HV_X64_MSR_SCONTROL,
            HV_X64_MSR_SIEFP, HV_X64_MSR_SIMP, HV_X64_MSR_SINT0 + MSG_SINT,
            HV_X64_MSR_SINT0 + TIMER_SINT, HV_X64_MSR_STIMER0_CONFIG,
            HV_X64_MSR_STIMER0_COUNT, HV_X64_MSR_STIMER1_CONFIG,
            HV_X64_MSR_STIMER1_COUNT, HV_X64_MSR_REFERENCE_TSC,
            /* the rate the TSC page's scale was made from (hv-frequencies) */
            HV_X64_MSR_TSC_FREQUENCY,
        };
        enum { KEPT_MSRS = sizeof(kept_msrs) / sizeof(kept_msrs[0]) };
        uint64_t saved[KEPT_MSRS], now, last, deadline;
        int restored = 0, went_back = 0, changed = 0, i;

        wrmsr(HV_X64_MSR_STIMER0_COUNT, 10000);
        wrmsr(HV_X64_MSR_STIMER0_CONFIG, (uint64_t)TIMER_SINT << 16 | 2 | 1);
        wrmsr(HV_X64_MSR_STIMER1_COUNT, 10000);
        wrmsr(HV_X64_MSR_STIMER1_CONFIG, 1 << 12 | DIRECT_VECTOR << 4 | 2 | 1);
        for (i = 0; i < KEPT_MSRS; i++) {
            saved[i] = rdmsr(kept_msrs[i]);
        }
        puts_serial("SYNIC-TEST: save now\n");
        last = ref_time();
        deadline = last + SAVE_RESTORE_WAIT;
        while (!restored && last < deadline) {
            restored = fw_cfg_has_file(RESTORED_FILE);
            now = ref_time();
            went_back |= now < last;
            last = now;
        }
        check(restored, "save/restore: the guest runs on in the restoring QEMU");
        if (restored) {
            for (i = 0; i < KEPT_MSRS; i++) {
                now = rdmsr(kept_msrs[i]);
                if (now != saved[i]) {
                    changed++;
                    puts_serial("SYNIC-TEST: MSR ");
                    puthex(kept_msrs[i]);
                    puts_serial(" was ");
                    puthex(saved[i]);
                    puts_serial(" is ");
                    puthex(now);
                    puts_serial("\n");
                }
            }
            check(!changed, "save/restore: the hypercall, SynIC, timer, TSC "
                  "page and TSC frequency MSRs read as they were saved");
            check(!went_back && ref_time() >= last, "save/restore: the "
                  "reference time never went back");
            a = timer_msgs;
            b = irq_count[DIRECT_VECTOR];
            check(wait_count(&timer_msgs, a + 20), "save/restore: stimer0 "
                  "(message mode) delivers 20 more expiry messages");
            check(wait_count(&irq_count[DIRECT_VECTOR], b + 20), "save/restore: "
                  "stimer1 (direct mode) raises 20 more interrupts");
            status = hypercall(0x0099, 0, 0);
            check((status & 0xffff) == 2, "save/restore: the hypercall page "
                  "still makes hypercalls (unknown one: invalid code)");
            /*
             * hyperv-testdev, the host side of the connections, keeps no
             * migrated state (as in stock QEMU): connect again
             */
            outl(TESTDEV_PORT, MSG_CONN << 24 | TESTDEV_MSG_CONN_CREATE << 16 |
                 0 << 8 | MSG_SINT);
            outl(TESTDEV_PORT, EVT_CONN << 24 | TESTDEV_EVT_CONN_CREATE << 16 |
                 0 << 8 | EVT_SINT);
            a = irq_count[MSG_VECTOR];
            check(post_message(0x1239, 'R') == 0 &&
                  wait_count(&irq_count[MSG_VECTOR], a + 1) &&
                  m->type == 0x1239 && m->payload[0] == 'R',
                  "save/restore: HvPostMessage reaches the SINT2 slot");
            m->type = 0;
            wrmsr(HV_X64_MSR_EOM, 0);
            check(tsc_page_in_range(), "save/restore: the reference TSC page "
                  "still agrees with the time reference counter");
            check(ref_time_agrees_with_pm_timer("after the restore"),
                  "save/restore: reference time still runs at the ACPI PM "
                  "timer's rate (within 2 %)");
        }
        wrmsr(HV_X64_MSR_STIMER0_CONFIG, 0);
        wrmsr(HV_X64_MSR_STIMER1_CONFIG, 0);
    }

    /*
     * A second vCPU: its VP index, its own synthetic timer delivering to its own
     * SynIC (none on the BSP's), and messages posted across vCPUs both ways.
     */
    a = timer_msgs;
    start_ap(AP_CPU);
    check(wait_count(&ap_started, 1) && ap_vp_index == 1,
          "AP started, VP index 1");
    check(wait_count(&ap_timer_msgs, 20), "AP: its own stimer0 delivers 20 "
          "periodic messages to its own SynIC");
    check(timer_msgs == a && msg_page[TIMER_SINT].type == 0,
          "AP's timer: no message on the BSP's SynIC");
    outl(TESTDEV_PORT, AP_MSG_CONN << 24 | TESTDEV_MSG_CONN_CREATE << 16 |
         1 << 8 | MSG_SINT);
    a = irq_count[MSG_VECTOR];
    post_input(INPUT_PAGE, AP_MSG_CONN, 0x1240, 'V');
    status = hypercall(0x005c, INPUT_PAGE, 0);
    check((status & 0xffff) == 0 && wait_count(&ap_msgs, 1) &&
          ap_msg_type == 0x1240 && irq_count[MSG_VECTOR] == a,
          "HvPostMessage on VP 0 to a connection of VP 1: in VP 1's SINT2 slot, "
          "not VP 0's");
    ap_post_request = 1;
    /* the message can interrupt VP 0 before VP 1's hypercall has returned */
    check(wait_count(&ap_posts_done, 1) &&
          wait_count(&irq_count[MSG_VECTOR], a + 1) && m->type == 0x1241 &&
          ap_post_status == 0, "HvPostMessage on VP 1 to a connection of VP 0: "
          "in VP 0's SINT2 slot");
    m->type = 0;
    wrmsr(HV_X64_MSR_EOM, 0);

    /* INIT resets the AP's architectural state, not its SynIC or timers */
    start_ap(AP_CPU);
    check(wait_count(&ap_restarted, 1) && ap_init_simp == (AP_SIMP_PAGE | 1) &&
          ap_init_scontrol == 1 && ap_init_sint4 == TIMER_VECTOR &&
          ap_init_stimer0 == ((uint64_t)TIMER_SINT << 16 | 2 | 1),
          "AP INIT-SIPI again: its SIMP, SCONTROL, SINT4 and stimer0 config are "
          "kept");
    a = ap_timer_msgs;
    check(wait_count(&ap_timer_msgs, a + 10), "AP after INIT: its timer still "
          "delivers to its SynIC");

    /*
     * Unplug the AP while its 1 ms timer runs: its timers must be stopped
     * before they are freed. QEMU must run on through many of the old
     * timer's periods: the long-mode checks below and the exit code say it
     * did. (Without patch 0011's unrealize, 7.2 keeps the unplugged vCPU's
     * timer firing on an object it never frees: a leak, not seen here. A
     * timer freed while armed crashes QEMU within this wait.)
     */
    /*
     * ... with a message in flight: the AP stops taking its timer's messages,
     * so an expiry finds the slot busy and waits for an EOM that will not come
     * (the slot's pending flag says one waits). The unplug forgets it, and
     * its completion, after the vCPU and its SynIC are gone, must still find
     * its route's SynIC (QEMU checks that a SynIC goes with no route left).
     */
    ap_hold_timer_slot = 1;
    for (t = ref_time() + 20000000; ref_time() < t &&
         !(((volatile struct hv_message *)AP_SIMP_PAGE)[TIMER_SINT].flags &
           HV_MESSAGE_FLAG_PENDING);) {
        __asm__ volatile("pause");
    }
    check(((volatile struct hv_message *)AP_SIMP_PAGE)[TIMER_SINT].flags &
          HV_MESSAGE_FLAG_PENDING, "AP: an expiry waits in flight for an EOM "
          "(its slot busy, pending flag set)");
    check(eject_ap(AP_CPU), "AP ejected through the ACPI CPU hotplug registers, its "
          "timer running and a message in flight");
    for (t = ref_time() + 1000000; ref_time() < t;) {
        __asm__ volatile("pause");
    }

    /*
     * Hot-add: once the guest asks, the test script plugs a new vCPU into
     * the spare slot (-smp 2,maxcpus=3; QMP device_add). The partition's
     * MSRs, which VP 0 set at the start (guest OS id, hypercall page,
     * reference TSC page), read the same on it, VMCALL is a hypercall there
     * (not #UD) and its HvPostMessage reaches VP 0. (Not in the unplugged
     * AP's slot: QEMU 7.2's MTTCG gives each vCPU thread a TCG context of
     * its own, up to maxcpus, and never takes one back.)
     */
    puts_serial("SYNIC-TEST: hot-add now\n");
    for (t = ref_time() + HOT_ADD_WAIT; !cpu_present(HOT_CPU) && ref_time() < t;) {
        __asm__ volatile("pause");
    }
    check(cpu_present(HOT_CPU), "hot-add: a new vCPU appears in the spare slot "
          "(ACPI CPU hotplug registers)");
    if (cpu_present(HOT_CPU)) {
        a = irq_count[MSG_VECTOR];
        ap_hot_added = 1;
        start_ap(HOT_CPU);
        check(wait_count(&ap_hot_started, 1), "hot-add: the new vCPU starts");
        check(ap_hot_os_id == rdmsr(HV_X64_MSR_GUEST_OS_ID) &&
              ap_hot_hypercall == rdmsr(HV_X64_MSR_HYPERCALL) &&
              ap_hot_reftsc == rdmsr(HV_X64_MSR_REFERENCE_TSC) && ap_hot_os_id &&
              (ap_hot_hypercall & 1) && (ap_hot_reftsc & 1),
              "hot-add: the new vCPU reads the partition's guest OS id, "
              "hypercall and reference TSC MSRs as VP 0 does");
        if (ap_hot_os_id != rdmsr(HV_X64_MSR_GUEST_OS_ID)) {
            puts_serial("SYNIC-TEST: the new vCPU read GUEST_OS_ID ");
            puthex(ap_hot_os_id);
            puts_serial("\n");
        }
        check(ap_hot_vmcall_fault == 0, "hot-add: VMCALL on the new vCPU is a "
              "hypercall, not #UD");
        check(wait_count(&irq_count[MSG_VECTOR], a + 1) && m->type == 0x1242 &&
              ap_hot_post_status == 0, "hot-add: HvPostMessage on the new vCPU "
              "reaches VP 0's SINT2 slot");
        m->type = 0;
        wrmsr(HV_X64_MSR_EOM, 0);
        check(eject_ap(HOT_CPU), "hot-add: the new vCPU ejected again");
    }

    /* last, as it does not come back to protected mode */
    long_mode_test();
}

static void finish(void)
{
    if (failures) {
        puts_serial("SYNIC-TEST: FAILED\n");
        qemu_exit(1);
    }
    puts_serial("SYNIC-TEST: PASS\n");
    qemu_exit(0);
}

/* boot.S */
void enter_long_mode(void (*cont)(void), uint32_t pml4, uint32_t input,
                     uint32_t evt_conn);
volatile uint64_t lm_post_status = ~0ull, lm_signal_status = ~0ull;

#define LM_MESSAGE_TYPE 0x1250

/* compatibility mode, after the 64-bit hypercalls: check what they did */
static void long_mode_checks(void)
{
    volatile struct hv_message *m = &msg_page[MSG_SINT];
    uint64_t deadline = ref_time() + 20000000;

    while (m->type != LM_MESSAGE_TYPE && ref_time() < deadline) {
        __asm__ volatile("pause");
    }
    check((lm_post_status & 0xffff) == 0 && m->type == LM_MESSAGE_TYPE &&
          m->payload[0] == 'L', "64-bit ABI (RCX control, RDX input GPA): "
          "HvPostMessage succeeds and the message is in the SINT2 slot");
    if ((lm_post_status & 0xffff) != 0 || m->type != LM_MESSAGE_TYPE) {
        puts_serial("SYNIC-TEST: HvPostMessage status ");
        puthex(lm_post_status);
        puts_serial(", SINT2 slot type ");
        puthex(m->type);
        puts_serial("\n");
    }
    deadline = ref_time() + 20000000;
    while (!(evt_page[EVT_SINT * 64] & (1u << EVT_CONN)) && ref_time() < deadline) {
        __asm__ volatile("pause");
    }
    check((lm_signal_status & 0xffff) == 0 &&
          (evt_page[EVT_SINT * 64] & (1u << EVT_CONN)),
          "64-bit ABI, fast (RDX parameter): HvSignalEvent sets the event flag");
    finish();
}

static void long_mode_test(void)
{
    uint64_t *pml4 = (uint64_t *)LM_PML4, *pdpt = (uint64_t *)LM_PDPT;
    uint64_t *pd = (uint64_t *)LM_PD;
    int i;

    for (i = 0; i < 512; i++) {
        pml4[i] = 0;
        pdpt[i] = 0;
        pd[i] = (uint64_t)i << 21 | 0x83;       /* present, writable, 2 MiB */
    }
    pml4[0] = LM_PDPT | 3;
    pdpt[0] = LM_PD | 3;
    post_input(INPUT_PAGE, MSG_CONN, LM_MESSAGE_TYPE, 'L');
    msg_page[MSG_SINT].type = 0;
    evt_page[EVT_SINT * 64] &= ~(1u << EVT_CONN);
    __asm__ volatile("mfence" : : : "memory");
    enter_long_mode(long_mode_checks, LM_PML4, INPUT_PAGE, EVT_CONN);
}
