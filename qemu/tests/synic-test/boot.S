/*
 * Multiboot entry, GDT and interrupt stubs of the SynIC test guest.
 * 32-bit protected mode, no paging: guest virtual == physical.
 */
    .section .multiboot, "a"
    .align 4
    .long 0x1BADB002
    .long 0
    .long -0x1BADB002

    .text
    .globl _start
_start:
    cli
    mov $stack_top, %esp
    lgdt gdt_desc
    ljmp $0x08, $1f
1:  mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %ax, %fs
    mov %ax, %gs
    call main
2:  cli
    hlt
    jmp 2b

/* push the vector number, call isr_handler(vector) */
    .macro ISR_BODY vec
    pusha
    push $\vec
    call isr_handler
    add $4, %esp
    popa
    iret
    .endm

/* one stub per vector */
    .macro ISR vec
    .globl isr_\vec
isr_\vec:
    ISR_BODY \vec
    .endm

    .irp v, 0,1,2,3,4,5,7,8,9,10,11,12,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,80,81,82,83,255
    ISR \v
    .endr

/*
 * #UD and #GP may be expected: the test sets fault_resume to the address after
 * the instruction it expects to fault. The stub then records the vector in
 * fault_vector, clears fault_resume and returns there. An unexpected one (no
 * resume address) goes to isr_handler, which fails the test.
 */
    .macro EXPECTABLE vec, errcode
    .globl isr_\vec
isr_\vec:
    cmpl $0, fault_resume
    je 1f
    .if \errcode
    add $4, %esp                /* the error code */
    .endif
    push %eax
    movl $\vec, fault_vector
    mov fault_resume, %eax
    mov %eax, 4(%esp)           /* the saved EIP */
    movl $0, fault_resume
    pop %eax
    iret
1:  ISR_BODY \vec
    .endm

    EXPECTABLE 6, 0
    EXPECTABLE 13, 1

/*
 * The AP's start: real-mode code that the BSP copies to AP_TRAMPOLINE (below
 * 1 MiB) and starts with INIT-SIPI-SIPI. It loads this GDT (through a copy of
 * its descriptor inside the trampoline), enters protected mode and jumps to
 * ap_entry32, which is linked where the rest is.
 */
    .code16
    .globl ap_tramp_start, ap_tramp_end
ap_tramp_start:
    cli
    mov %cs, %ax
    mov %ax, %ds
    lgdtl ap_gdtr - ap_tramp_start
    mov %cr0, %eax
    orl $1, %eax
    mov %eax, %cr0
    ljmpl $0x08, $ap_entry32
    .align 4
ap_gdtr:
    .word gdt_end - gdt - 1
    .long gdt
ap_tramp_end:

    .code32
ap_entry32:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %ax, %fs
    mov %ax, %gs
    mov $ap_stack_top, %esp
    call ap_main
3:  cli
    hlt
    jmp 3b

/*
 * Long mode, for the 64-bit hypercall ABI. enter_long_mode(cont, pml4, input,
 * evt_conn) turns on PAE, EFER.LME and paging with the page tables at pml4
 * (identity-mapped by the caller), and in 64-bit mode makes two hypercalls by
 * the 64-bit register convention (control in RCX, input in RDX, output in R8):
 * HvPostMessage with its input page at `input`, and a fast HvSignalEvent on
 * connection evt_conn. Their RAX go to lm_post_status and lm_signal_status.
 * It then returns to 32-bit code in compatibility mode and calls cont, which
 * never returns. Interrupts stay off: the IDT is a 32-bit one.
 */
/* how many times HvPostMessage is tried while its answer is 0x13 */
#define LM_POST_TRIES 10000000

    .code32
    .globl enter_long_mode
enter_long_mode:
    cli
    mov 4(%esp), %edi               /* cont */
    mov 12(%esp), %esi              /* input page */
    mov 16(%esp), %ebp              /* evt_conn */
    mov 8(%esp), %eax
    mov %eax, %cr3
    mov %cr4, %eax
    or $0x20, %eax                  /* PAE */
    mov %eax, %cr4
    mov $0xC0000080, %ecx           /* EFER */
    rdmsr
    or $0x100, %eax                 /* LME */
    wrmsr
    mov %cr0, %eax
    or $0x80000000, %eax            /* PG */
    mov %eax, %cr0
    ljmp $0x18, $lm64
    .code64
lm64:
    mov %esp, %esp                  /* zero-extended into RSP */
    /*
     * HV_STATUS_INSUFFICIENT_BUFFERS (0x13): the connection's previous message
     * is still being completed by QEMU's main loop; try again, as Linux does
     */
    mov $LM_POST_TRIES, %r12d         /* r8-r11 are the hypercall's to clobber */
1:  mov $0x5c, %ecx                 /* HvPostMessage, slow */
    mov %esi, %edx
    xor %r8d, %r8d
    vmcall
    cmp $0x13, %ax
    jne 2f
    pause
    dec %r12d
    jnz 1b
2:  mov $lm_post_status, %ebx
    mov %rax, (%rbx)
    mov $0x1005d, %ecx              /* HvSignalEvent, fast */
    mov %ebp, %edx
    xor %r8d, %r8d
    vmcall
    mov $lm_signal_status, %ebx
    mov %rax, (%rbx)
    push $0x08                      /* the 32-bit code segment: compatibility mode */
    mov $lm_compat, %eax
    push %rax
    lretq
    .code32
lm_compat:
    call *%edi
4:  cli
    hlt
    jmp 4b

/*
 * run_at_cpl3(fn): call fn() at CPL 3 (flat DPL 3 segments, interrupts off) and
 * come back. fn ends with `int $0x84` (a DPL 3 gate to cpl3_return), which
 * restores the CPL 0 stack saved here and returns from run_at_cpl3.
 */
    .code32
    .globl run_at_cpl3, cpl3_return
run_at_cpl3:
    pushf
    push %ebx
    push %esi
    push %edi
    push %ebp
    mov %esp, cpl0_esp
    mov 24(%esp), %eax              /* fn */
    push $0x2B                      /* SS: DPL 3 data */
    push $cpl3_stack_top
    push $0x002                     /* EFLAGS: interrupts off */
    push $0x23                      /* CS: DPL 3 code */
    push %eax
    mov $0x2B, %bx
    mov %bx, %ds
    mov %bx, %es
    iret
cpl3_return:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov cpl0_esp, %esp
    pop %ebp
    pop %edi
    pop %esi
    pop %ebx
    popf
    ret

    .data
    .align 8
gdt:
    .quad 0
    .quad 0x00CF9A000000FFFF    /* 0x08: flat 32-bit code */
    .quad 0x00CF92000000FFFF    /* 0x10: flat data */
    .quad 0x00AF9A000000FFFF    /* 0x18: 64-bit code */
    .quad 0x00CFFA000000FFFF    /* 0x20: flat 32-bit code, DPL 3 */
    .quad 0x00CFF2000000FFFF    /* 0x28: flat data, DPL 3 */
    .globl gdt_tss
gdt_tss:
    .quad 0                     /* 0x30: the TSS, filled in by run_at_cpl3() */
gdt_end:
gdt_desc:
    .word gdt_desc - gdt - 1
    .long gdt

    .bss
    .align 16
    .space 16384
stack_top:
    .space 4096
ap_stack_top:
    .space 4096
cpl3_stack_top:
cpl0_esp:
    .long 0
